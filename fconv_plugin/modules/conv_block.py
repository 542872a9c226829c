"""Convolutional blocks (Gehring et al. 2017, §3.2).

A block is a 1-D convolution with kernel width k producing 2d channels, a gated
linear unit v([A B]) = A ⊗ σ(B) back to d channels, and a residual connection from
an earlier block: h = (v(W [h_{i-k/2}..h_{i+k/2}] + b) + r) · √0.5 (§3.4 scales the
sum to keep its variance). The residual is projected where the widths differ.

Encoder and decoder lay the blocks out from one spec, a list of
``(out_channels, kernel_width[, residual])``; ``residual`` is how many blocks back
the residual comes from (default 1, 0 for none), and both run them with
``forward_conv_blocks``; the decoder adds its attention inside each block (§3.3).
The gate is a module (``GatedLinearUnit``, no parameters) so that a model's int8 form
can swap in one that computes it in float64 (``deployment/int8.py``).
"""

import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import torch.nn.functional as F
from torch import Tensor, nn

from .weight_norm import WeightNormLinear

SQRT_HALF = math.sqrt(0.5)


@dataclass(frozen=True)
class ConvLayerSpec:
    out_channels: int
    kernel_size: int
    residual: int = 1


@dataclass(frozen=True)
class ConvBlockPlan:
    """Widths of one block once its place in the stack is known."""

    in_channels: int
    out_channels: int
    kernel_size: int
    residual: int
    residual_channels: int


def plan_conv_stack(specs: Sequence[ConvLayerSpec], in_channels: int) -> List[ConvBlockPlan]:
    """Input, output and residual widths of every block of a stack."""
    plans = []
    block_inputs = [in_channels]
    for spec in specs:
        if spec.residual == 0:
            residual_channels = spec.out_channels
        else:
            residual_channels = block_inputs[-spec.residual]
        plans.append(
            ConvBlockPlan(
                in_channels=in_channels,
                out_channels=spec.out_channels,
                kernel_size=spec.kernel_size,
                residual=spec.residual,
                residual_channels=residual_channels,
            )
        )
        in_channels = spec.out_channels
        block_inputs.append(spec.out_channels)
    return plans


def residual_projection(plan: ConvBlockPlan) -> Optional[WeightNormLinear]:
    """A linear map for the residual, only where its width differs from the block's."""
    if plan.residual_channels == plan.out_channels:
        return None
    return WeightNormLinear(plan.residual_channels, plan.out_channels)


def select_residual(
    block_outputs: List[Tensor], plan: ConvBlockPlan, projection: Optional[nn.Module]
) -> Optional[Tensor]:
    """The residual input of a block: the output ``plan.residual`` blocks back."""
    if plan.residual == 0:
        return None
    residual = block_outputs[-plan.residual]
    return residual if projection is None else projection(residual)


class GatedLinearUnit(nn.Module):
    """v([A B]) = A ⊗ σ(B) over the last dimension (§3.2). No parameters: it adds nothing
    to the state dict."""

    def forward(self, x: Tensor) -> Tensor:
        return F.glu(x, dim=-1)


def add_residual(x: Tensor, residual: Optional[Tensor]) -> Tensor:
    """(x + r) · √0.5, halving the variance of the sum (§3.4)."""
    if residual is None:
        return x
    return (x + residual).mul_(SQRT_HALF)


def same_length_padding(kernel_size: int) -> Tuple[int, int]:
    """Zero padding (left, right) that keeps the encoder's sequence length.

    Odd kernels are padded evenly; even kernels get one more step on the right.
    """
    return (kernel_size - 1) // 2, kernel_size // 2


def forward_conv_blocks(
    x: Tensor,
    plans: Sequence[ConvBlockPlan],
    projections: Sequence[Optional[nn.Module]],
    convolve: Callable[[int, Tensor], Tensor],
    dropout: Callable[[Tensor], Tensor],
    gate: Callable[[Tensor], Tensor],
    attend: Optional[Callable[[int, Tensor], Tensor]] = None,
    padding: Optional[Tensor] = None,
) -> Tensor:
    """The stack of blocks: h_l = (attend(v(conv(dropout(h_{l-1})))) + r_l) · √0.5.

    ``convolve(l, x)`` is block l's convolution (with whatever padding its side needs),
    ``gate`` the gated linear unit v (a ``GatedLinearUnit``) and ``attend(l, x)``, when
    given, the decoder's attention step of block l.
    ``padding`` (time x batch x 1, True at padding; the encoder's) is zeroed before each
    block, so padded positions never reach real ones through the convolutions.
    """
    block_outputs = [x]
    for index, (plan, projection) in enumerate(zip(plans, projections)):
        residual = select_residual(block_outputs, plan, projection)
        if padding is not None:
            x = x.masked_fill(padding, 0)
        x = gate(convolve(index, dropout(x)))
        if attend is not None:
            x = attend(index, x)
        x = add_residual(x, residual)
        block_outputs.append(x)
    return x
