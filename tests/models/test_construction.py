"""Each part is built from its constructor's arguments alone: no state wired in afterwards."""

import argparse

import pytest
import torch

from fconv_plugin.errors import FConvError
from fconv_plugin.models import FConvDecoder, FConvEncoder, FConvModel
from fconv_plugin.models.architectures import base_architecture
from fconv_plugin.modules import ConvLayerSpec
from tests.support import make_dictionary

DICTIONARY = make_dictionary(12)
LAYERS = [ConvLayerSpec(8, 3)] * 2


def _encoder(num_attention_layers):
    torch.manual_seed(3)
    return FConvEncoder(DICTIONARY, embed_dim=6, convolutions=LAYERS, dropout=0.0,
                        num_attention_layers=num_attention_layers)


def test_an_encoder_built_alone_scales_its_gradient_by_its_attention_layers():
    tokens = torch.tensor([[5, 6, 7, 8, DICTIONARY.eos()]])
    gradients = {}
    for layers in (1, 3):
        encoder = _encoder(layers)
        out = encoder(tokens)
        (out["encoder_out"][0].sum() + out["encoder_out"][1].sum()).backward()
        gradients[layers] = next(p.grad for name, p in encoder.named_parameters() if name.startswith("fc2"))
    # z = fc2(...) is scaled by 1 / (2 · layers) on the way back: 1/2 against 1/6, by hand
    assert torch.allclose(gradients[3], gradients[1] / 3, rtol=1e-5, atol=1e-8)
    assert gradients[1].abs().sum() > 0


def test_a_model_refuses_an_encoder_built_for_another_number_of_attention_layers():
    decoder = FConvDecoder(DICTIONARY, embed_dim=6, out_embed_dim=6, convolutions=LAYERS * 2,
                           attention=[True, False, True, True], dropout=0.0)
    FConvModel(_encoder(3), decoder)
    with pytest.raises(FConvError, match="scales its gradient for 1 attention layers but the decoder has 3"):
        FConvModel(_encoder(1), decoder)


def test_every_option_the_model_reads_is_declared():
    parser = argparse.ArgumentParser()
    FConvModel.add_args(parser)
    args = parser.parse_args([])
    base_architecture(args)
    assert args.int8_weights is False and args.pointer_generator is False
    assert parser.parse_args(["--int8-weights"]).int8_weights is True
