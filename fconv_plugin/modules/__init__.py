"""The paper's building blocks, one concept a module.

The names below are what the model is built from and what a user needs to build or
inspect one; helpers used inside one module (padding, residual selection, the GLU
itself) are imported from that module.
"""

from .attention import AttentionLayer, AttentionSource
from .causal_convolution import CausalConvolution
from .conv_block import ConvLayerSpec, forward_conv_blocks
from .embeddings import LearnedPositionalEmbedding, TokenEmbedding
from .gradient_scaling import encoder_gradient_scale, scale_gradient
from .pointer_generator import PointerGenerator
from .weight_norm import WeightNormConvTBC, WeightNormLinear, WeightNormalized

__all__ = [
    "AttentionLayer",
    "AttentionSource",
    "CausalConvolution",
    "ConvLayerSpec",
    "LearnedPositionalEmbedding",
    "PointerGenerator",
    "TokenEmbedding",
    "WeightNormConvTBC",
    "WeightNormLinear",
    "WeightNormalized",
    "encoder_gradient_scale",
    "forward_conv_blocks",
    "scale_gradient",
]
