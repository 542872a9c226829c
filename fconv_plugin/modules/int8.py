"""int8 weights for deployment on CPUs (not in the paper: a way to serve its model).

Every matrix product of a trained model (convolutions, attention projections, fc1,
fc2, fc3, residual projections) can run with int8 weights: each output row of the
weight is stored as int8 with its own scale (symmetric, per channel), and activations
are quantised on the fly, per call (torch's dynamic quantisation, fbgemm/x86
kernels). The attention itself (softmax over dot products with the encoder states)
stays in float32. Embedding tables are stored the same way, and a looked-up row is
turned back into float32.

Convolutions become one matrix product over windows: a kernel (k, in, out) is the
matrix (out, k · in), and the input is unfolded into its windows of k steps, the same
row order the decoder's one-step convolution uses.
"""

import warnings
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# fbgemm without VNNI (AVX2) can saturate 8-bit × 8-bit sums; 7-bit activations avoid it
REDUCE_RANGE = True


class Int8Weight(nn.Module):
    """A weight matrix (out x in) as int8 rows and one float scale per row."""

    def __init__(self, out_features: int, in_features: int):
        super().__init__()
        self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("scale", torch.ones(out_features))
        self._packed = None  # fbgemm's packed form, made at first use

    @classmethod
    def from_float(cls, weight: Tensor) -> "Int8Weight":
        """Symmetric per-row quantisation: w ≈ scale · q, q in [-127, 127]."""
        weight = weight.detach().float()
        int8 = cls(*weight.shape)
        scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0
        int8.weight.copy_(torch.round(weight / scale.unsqueeze(1)).clamp(-127, 127).to(torch.int8))
        int8.scale.copy_(scale)
        return int8

    def dequantized(self) -> Tensor:
        return self.weight.float() * self.scale.unsqueeze(1)

    def linear(self, x: Tensor, bias: Optional[Tensor]) -> Tensor:
        """x @ wᵀ + b over the last dimension of ``x``."""
        if self._packed is None:
            with warnings.catch_warnings():
                # torch 2.13 announces the end of its quantized tensors (pytorch #184982); the
                # pinned version has them, and constraints.txt keeps it
                warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
                qweight = torch._make_per_channel_quantized_tensor(
                    self.weight, self.scale.double(), torch.zeros_like(self.scale, dtype=torch.long), 0
                )
            self._packed = torch.ops.quantized.linear_prepack(qweight, None if bias is None else bias.detach().float())
        out = torch.ops.quantized.linear_dynamic(x.reshape(-1, x.size(-1)).contiguous(), self._packed, REDUCE_RANGE)
        return out.view(*x.shape[:-1], out.size(-1))

    def convolve_tbc(self, x: Tensor, kernel_size: int, padding: int, bias: Optional[Tensor]) -> Tensor:
        """The convolution of ``x`` (time x batch x in), zero-padded by ``padding`` at both ends."""
        if padding > 0:
            x = F.pad(x, (0, 0, 0, 0, padding, padding))
        windows = x.unfold(0, kernel_size, 1).transpose(-1, -2)  # time' x batch x k x in
        return self.linear(windows.reshape(*windows.shape[:2], -1), bias)

    def embedding(self, indices: Tensor) -> Tensor:
        """Rows ``indices`` of the table this matrix holds, as float32."""
        return F.embedding(indices, self.weight).float() * F.embedding(indices, self.scale.unsqueeze(1))

    def forget_packed(self) -> None:
        """After a state dict was loaded: pack the new values at the next use."""
        self._packed = None

    def _load_from_state_dict(self, *args, **kwargs):
        self._packed = None
        return super()._load_from_state_dict(*args, **kwargs)

    def extra_repr(self) -> str:
        return f"{self.weight.size(1)} -> {self.weight.size(0)}, int8 per-row scales"
