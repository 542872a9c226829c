"""The paper's building blocks, one concept a module."""

from .attention import AttentionLayer, AttentionSource
from .causal_convolution import CausalConvolution
from .conv_block import (
    ConvLayerSpec,
    add_residual,
    forward_conv_blocks,
    gated_linear_unit,
    plan_conv_stack,
    residual_projection,
    same_length_padding,
    select_residual,
)
from .embeddings import LearnedPositionalEmbedding, TokenEmbedding, make_positions, positional_embedding_or_none
from .gradient_scaling import encoder_gradient_scale, scale_gradient
from .int8 import Int8Weight
from .pointer_generator import PointerGenerator
from .weight_norm import WeightNormConvTBC, WeightNormLinear, WeightNormalized

__all__ = [
    "AttentionLayer",
    "AttentionSource",
    "CausalConvolution",
    "Int8Weight",
    "ConvLayerSpec",
    "LearnedPositionalEmbedding",
    "PointerGenerator",
    "TokenEmbedding",
    "WeightNormConvTBC",
    "WeightNormLinear",
    "WeightNormalized",
    "add_residual",
    "encoder_gradient_scale",
    "forward_conv_blocks",
    "gated_linear_unit",
    "make_positions",
    "plan_conv_stack",
    "positional_embedding_or_none",
    "residual_projection",
    "same_length_padding",
    "scale_gradient",
    "select_residual",
]
