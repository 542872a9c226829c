"""Encoder gradient scaling (Gehring et al. 2017, §3.4).

The encoder output feeds every attention layer, so without care it receives a
gradient that grows with their number. Its gradient is scaled by 1 / (2 · #attention
layers); the forward value is untouched, and the source embeddings, which reach the
attention directly, are left out.
"""

from torch import Tensor, autograd


class _ScaleGradient(autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad * ctx.scale, None


def scale_gradient(x: Tensor, scale: float) -> Tensor:
    """Identity forward; multiplies the gradient by ``scale`` backward."""
    return _ScaleGradient.apply(x, scale)


def encoder_gradient_scale(num_attention_layers: int) -> float:
    """1 / (2 · #attention layers); 1 when the decoder has no attention."""
    if num_attention_layers == 0:
        return 1.0
    return 1.0 / (2.0 * num_attention_layers)
