"""Weight-normalised layers (Gehring et al. 2017, §3.5; Salimans & Kingma 2016).

Every layer but the embeddings is weight normalised: ``w = g · v / ‖v‖``, the norm
taken over all dimensions but ``norm_dim``. Parameters are named ``weight_g`` and
``weight_v`` with the shapes fairseq's fconv checkpoints use.

Until the model is prepared for generation the weight is recomputed at every call
(the optimizers update parameters through ``.data``, which no version counter sees).
fairseq's ``make_generation_fast_`` makes each layer store its weight w itself as
``weight_v`` with ``weight_g`` = ‖w‖ — the same function, one copy of the weight, kept
in the layout the GEMM reads fastest — and serve it without recomputing. Training
again (``train(True)``) or loading a state dict ends that: w is derived from
``weight_g`` and ``weight_v`` at every call again.

Mixed precision (``FConvModel.compute_in_``): the parameters stay float32, so ‖v‖ and w
are computed in float32, and w is cast once per call to the dtype of the layer's input
(bfloat16), in which the product runs. A float32 input casts nothing.
"""

from typing import Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .initialization import std_for_glu_input, std_for_linear


def norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """L2 norm of ``v`` over every dimension but ``dim``, keeping dimensions."""
    other_dims = [d for d in range(v.dim()) if d != dim]
    return torch.linalg.vector_norm(v, dim=other_dims, keepdim=True)


def in_dtype_of(x: Tensor, *weights: Tensor) -> Tuple[Tensor, ...]:
    """``weights`` in the dtype of the input ``x`` they multiply (mixed precision: float32
    parameters, bfloat16 products); the tensors themselves where the dtypes agree."""
    return tuple(w if w.dtype == x.dtype else w.to(x.dtype) for w in weights)


class WeightNormalized(nn.Module):
    """Holds ``weight_g``/``weight_v`` and derives ``w = g · v / ‖v‖`` from them."""

    def _init_weight_norm(self, weight: Tensor, norm_dim: int) -> None:
        self.norm_dim = norm_dim
        self.weight_g = nn.Parameter(norm_except_dim(weight, norm_dim))
        self.weight_v = nn.Parameter(weight)
        self._frozen = False

    def normalized_weight(self) -> Tensor:
        if self._frozen and not torch.is_grad_enabled():
            return self.weight_v  # w itself, see make_generation_fast_
        # torch's fused kernel (forward and backward) for g · v / ‖v‖
        return torch._weight_norm(self.weight_v, self.weight_g, self.norm_dim)

    def make_generation_fast_(self, **kwargs) -> None:
        """Called by fairseq when the model is prepared for inference only."""
        with torch.no_grad():
            weight = self.normalized_weight()
            self.weight_v.data = self._inference_layout(weight)
            self.weight_g.data = norm_except_dim(weight, self.norm_dim)
        self._frozen = True

    def _inference_layout(self, weight: Tensor) -> Tensor:
        return weight.contiguous()

    def train(self, mode: bool = True):
        if mode:
            self._frozen = False  # the optimizer is about to change v and g
        return super().train(mode)

    def _load_from_state_dict(self, *args, **kwargs):
        self._frozen = False  # a loaded v is no longer the weight itself
        return super()._load_from_state_dict(*args, **kwargs)


class WeightNormLinear(WeightNormalized):
    """Linear layer ``y = x wᵀ + b`` with weight normalisation over rows (norm_dim 0)."""

    def __init__(self, in_features: int, out_features: int, dropout: float = 0.0):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        weight = torch.empty(out_features, in_features)
        nn.init.normal_(weight, mean=0.0, std=std_for_linear(in_features, dropout))
        self._init_weight_norm(weight, norm_dim=0)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x: Tensor) -> Tensor:
        if self._frozen and not torch.is_grad_enabled():
            # generation: x @ wᵀ with wᵀ contiguous in memory, the faster GEMM layout here
            weight, bias = in_dtype_of(x, self.normalized_weight(), self.bias)
            out = torch.addmm(bias, x.reshape(-1, self.in_features), weight.t())
            return out.view(*x.shape[:-1], self.out_features)
        return F.linear(x, *in_dtype_of(x, self.normalized_weight(), self.bias))

    def _inference_layout(self, weight: Tensor) -> Tensor:
        """(out, in) values over (in, out) storage, so that wᵀ is contiguous."""
        return weight.t().contiguous().t()

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}"


class WeightNormConvTBC(WeightNormalized):
    """1-D convolution over time x batch x channel input whose output feeds a GLU.

    The weight has fairseq's ConvTBC layout ``(kernel, in, out)`` and is normalised
    per output channel (norm_dim 2). Initialised for a GLU input (§3.5).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dropout: float = 0.0):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        weight = torch.empty(kernel_size, in_channels, out_channels)
        std = std_for_glu_input(kernel_size * in_channels, dropout)
        nn.init.normal_(weight, mean=0.0, std=std)
        self._init_weight_norm(weight, norm_dim=2)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def convolve(self, x: Tensor, padding: int = 0) -> Tensor:
        """Convolve ``x`` (time x batch x channel), zero-padding both ends by ``padding``."""
        return torch.conv_tbc(x.contiguous(), *in_dtype_of(x, self.normalized_weight(), self.bias), padding)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"

