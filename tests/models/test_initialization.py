"""Initial weights follow the paper's formulas (§3.5), checked per weight class."""

import math

import pytest
import torch

from tests.support import DictionaryTask, build_plugin_model, make_dictionary

DROPOUT = 0.2
TASK = DictionaryTask(make_dictionary(3000, "s"), make_dictionary(3000, "t"))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_plugin_model(
        "fconv", TASK, dropout=DROPOUT, encoder_embed_dim=256, decoder_embed_dim=256, decoder_out_embed_dim=128,
        encoder_layers="[(256, 3)] * 2 + [(384, 5)]", decoder_layers="[(256, 3)] * 2 + [(384, 3)]",
    )


def _assert_std(tensor, expected, name):
    assert abs(float(tensor.float().std()) - expected) / expected < 0.05, (name, float(tensor.std()), expected)


def test_embeddings_are_normal_with_std_0_1_and_zero_padding_rows(model):
    for module in (model.encoder.embed_tokens, model.encoder.embed_positions, model.decoder.embed_tokens, model.decoder.embed_positions):
        weight = module.weight.detach()
        assert torch.count_nonzero(weight[module.padding_idx]) == 0
        rows = torch.ones(weight.size(0), dtype=torch.bool)
        rows[module.padding_idx] = False
        _assert_std(weight[rows], 0.1, module)
        assert abs(float(weight[rows].mean())) < 0.01


def test_layers_feeding_a_glu_use_4_times_the_variance_and_dropout_correction(model):
    for conv in list(model.encoder.convolutions) + list(model.decoder.convolutions):
        fan_in = conv.kernel_size * conv.in_channels
        _assert_std(conv.normalized_weight().detach(), math.sqrt(4 * (1 - DROPOUT) / fan_in), conv)


def test_linear_layers_after_dropout_and_without_it(model):
    after_dropout = [model.encoder.fc1, model.decoder.fc1, model.decoder.fc3]
    without_dropout = [model.encoder.fc2, model.decoder.fc2]
    without_dropout += [p for p in list(model.encoder.projections) + list(model.decoder.projections) if p is not None]
    for attention in model.decoder.attention:
        without_dropout += [attention.in_projection, attention.out_projection]
    assert len([p for p in model.encoder.projections if p is not None]) == 1
    for layer in after_dropout:
        _assert_std(layer.normalized_weight().detach(), math.sqrt((1 - DROPOUT) / layer.in_features), layer)
    for layer in without_dropout:
        _assert_std(layer.normalized_weight().detach(), math.sqrt(1 / layer.in_features), layer)


def test_biases_are_zero_and_weight_norm_starts_at_the_drawn_weight(model):
    for name, parameter in model.named_parameters():
        if name.endswith("bias"):
            assert torch.count_nonzero(parameter) == 0, name
    for module in model.modules():
        if hasattr(module, "weight_v"):
            assert torch.allclose(module.normalized_weight(), module.weight_v, atol=1e-6)
