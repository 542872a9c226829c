"""The ConvS2S model and its registration under fairseq's ``fconv`` names."""

from .architectures import ARCHITECTURES
from .fconv import FConvDecoder, FConvEncoder, FConvModel
from .registry import take_over_model

take_over_model("fconv", FConvModel, ARCHITECTURES)

__all__ = ["ARCHITECTURES", "FConvDecoder", "FConvEncoder", "FConvModel"]
