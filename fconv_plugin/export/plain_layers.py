"""The model's layers with weight normalisation folded into plain weights, for ONNX.

An exported graph should hold w = g · v / ‖v‖ itself (§3.5: a reparametrisation for
training only), and ONNX has no ``conv_tbc``: torch's exporter has no translation
for it. The plain convolution is a product of each position's window of inputs with
the flattened kernel, the same function.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..modules.causal_convolution import CausalConvolution, CausalWindow
from ..deployment.int8 import convolution_windows, kernel_as_rows
from ..modules.layer_swap import replace_layers_
from ..modules.weight_norm import WeightNormalized, WeightNormConvTBC, WeightNormLinear


class PlainLinear(nn.Module):
    """``y = x wᵀ + b`` with w = g · v / ‖v‖ computed once."""

    def __init__(self, layer: WeightNormLinear):
        super().__init__()
        with torch.no_grad():
            self.weight = nn.Parameter(layer.normalized_weight().detach().clone().contiguous())
            self.bias = nn.Parameter(layer.bias.detach().clone())

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def row_function(self):
        """rows x in ↦ rows x out (the decoder step's form, ``decoding/steps.py``): one
        ONNX Gemm with its bias."""
        return self


class PlainConvTBC(nn.Module):
    """The encoder's convolution over time x batch x channel as one product of every
    position's window (its k inputs side by side) with the flattened kernel: on two
    cores onnxruntime ran the quickstart's encoder in 0.20 s this way against 0.27 s as
    ONNX's Conv over batch x channel x time (its layout changes and unfolding)."""

    def __init__(self, layer: WeightNormConvTBC):
        super().__init__()
        self.in_channels, self.out_channels, self.kernel_size = layer.in_channels, layer.out_channels, layer.kernel_size
        with torch.no_grad():
            kernel = layer.normalized_weight().detach()  # (k, in, out)
            # row j · in + c of a window multiplies kernel tap j, channel c
            self.flat_weight = nn.Parameter(kernel_as_rows(kernel).contiguous())
            self.bias = nn.Parameter(layer.bias.detach().clone())

    def convolve(self, x: Tensor, padding: int = 0) -> Tensor:
        """Convolve ``x`` (time x batch x channel), zero-padding both ends by ``padding``."""
        return self.window_product(convolution_windows(x, self.kernel_size, padding))

    def window_product(self, windows: Tensor) -> Tensor:
        return F.linear(windows, self.flat_weight, self.bias)

    def row_function(self):
        """Flattened windows (rows x k · in, oldest input first) ↦ rows x out: the decoder
        step's form of the causal convolution."""
        return self.window_product


class PlainCausalConvolution(CausalWindow, PlainConvTBC):
    """The decoder's causal convolution (§3.2); one step is a product with the flattened kernel."""


PLAIN_FORMS = {
    WeightNormLinear: PlainLinear,
    WeightNormConvTBC: PlainConvTBC,
    CausalConvolution: PlainCausalConvolution,
}


def fold_weight_norm_(model: nn.Module) -> None:
    """Replace every weight-normalised layer of ``model`` by its plain form, in place."""
    replace_layers_(model, PLAIN_FORMS, must_have_form=(WeightNormalized,), form_name="plain (ONNX)")
