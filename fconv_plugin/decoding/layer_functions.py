"""The decoder's layers as functions of a matrix of rows: what both forms of the step call.

``DecoderSteps.layers`` looks them up once per search (``steps.py``); the compiled step
(``compiled_step.py``) makes the same call in C++ for each that is a float32 ``addmm`` or
the compiled int8 loops' linear.
"""

from dataclasses import dataclass
from typing import Callable, List, Optional

import torch
from torch import Tensor

from ..modules import AttentionLayer
from ..modules.causal_convolution import CausalConvolution
from ..modules.weight_norm import WeightNormLinear

RowFunction = Callable[[Tensor], Tensor]


class AddmmRows:
    """rows ↦ addmm(b, rows, wᵀ): a float32 layer as a function of a matrix of rows, w looked
    up once; its operands named so that the compiled decoder step
    (``native/decoder_step.cpp``) makes the same call."""

    __slots__ = ("bias", "weight_t")

    def __init__(self, bias: Tensor, weight_t: Tensor):
        self.bias, self.weight_t = bias, weight_t

    def __call__(self, rows: Tensor) -> Tensor:
        return torch.addmm(self.bias, rows, self.weight_t)


def row_function(layer) -> RowFunction:
    """``layer`` as a function of a matrix of rows, what the step calls at every position:
    a layer's own ``row_function`` where it has one (the int8 forms, an export's plain
    layers); a causal convolution's ``window_product`` over flattened windows (rows x k · in,
    oldest input first) and a linear layer's ``forward`` on a matrix (rows x in ↦ x wᵀ + b),
    each the same ``addmm`` as the layer's, so the same bits; else the layer itself (a
    shared output embedding's ``nn.Linear``)."""
    if hasattr(layer, "row_function"):
        return layer.row_function()
    if isinstance(layer, CausalConvolution):
        return AddmmRows(layer.bias, layer.flat_weight())
    if isinstance(layer, WeightNormLinear):
        return AddmmRows(layer.bias, layer.normalized_weight().t())
    return layer


@dataclass
class BlockFunctions:
    """One convolution block's functions (§3.2), with its attention (§3.3) where it has one."""

    convolve: RowFunction  # flattened windows (rows x k·in) to rows x 2·out
    history: int  # k - 1 inputs kept between steps
    residual: int  # blocks back (0: none)
    project_residual: Optional[RowFunction]
    attention: Optional[AttentionLayer]
    project_in: Optional[RowFunction]
    project_out: Optional[RowFunction]


@dataclass
class LayerFunctions:
    """The decoder's layers as functions, looked up once per search (the weights as they are then)."""

    fc1: RowFunction
    blocks: List[BlockFunctions]
    fc2: RowFunction
    fc3: RowFunction
