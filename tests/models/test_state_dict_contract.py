"""Checkpoints move both ways between the plugin and fairseq's fconv (strict loading)."""

import pytest
import torch

from fconv_plugin.models import ARCHITECTURES
from tests.support import DictionaryTask, build_pair, build_plugin_model, make_dictionary

TASK = DictionaryTask(make_dictionary(20, "s"), make_dictionary(24, "t"))

ODD_CONFIGS = {
    "partial_attention": {"decoder_attention": "[True, False, False, True]", "decoder_layers": "[(32, 3)] * 4"},
    "residual_specs": {"encoder_layers": "[(32, 3), (48, 3, 2), (48, 3, 0), (32, 5, 3)]", "decoder_layers": "[(32, 3), (48, 3, 2), (32, 1, 0)]"},
    "even_encoder_kernel": {"encoder_layers": "[(32, 2), (32, 4)]", "decoder_layers": "[(32, 3)]"},
    "shared_output_embedding": {"share_input_output_embed": True, "decoder_out_embed_dim": 16, "decoder_layers": "[(32, 3)] * 2"},
}
SMALL = {"encoder_embed_dim": 16, "decoder_embed_dim": 16, "decoder_out_embed_dim": 16, "encoder_layers": "[(32, 3)] * 2"}


COPYING_ARCHITECTURES = {"fconv_gigaword_copy": "fconv_gigaword"}  # plugin-only, with the gate's parameters


def _configs():
    for arch in ARCHITECTURES:
        if arch not in COPYING_ARCHITECTURES:
            yield pytest.param(arch, {}, id=arch)
    for name, overrides in ODD_CONFIGS.items():
        yield pytest.param("fconv", {**SMALL, **overrides}, id=name)


@pytest.mark.parametrize("arch,overrides", list(_configs()))
def test_state_dict_keys_and_shapes_match_fairseq_both_ways(arch, overrides):
    ours, reference = build_pair(arch, TASK, **overrides)  # loads fairseq -> plugin strictly
    our_state, reference_state = ours.state_dict(), reference.state_dict()
    assert sorted(our_state) == sorted(reference_state)
    for name, tensor in our_state.items():
        assert tensor.shape == reference_state[name].shape, name
    for parameter in ours.parameters():
        with torch.no_grad():
            parameter.add_(0.5)
    reference.load_state_dict(ours.state_dict(), strict=True)  # plugin -> fairseq
    for name, tensor in reference.state_dict().items():
        assert torch.equal(tensor, ours.state_dict()[name]), name


@pytest.mark.parametrize("arch,plain_arch", sorted(COPYING_ARCHITECTURES.items()))
def test_a_copying_architecture_is_its_plain_one_plus_the_gate(arch, plain_arch):
    joined = DictionaryTask(TASK.target_dictionary, TASK.target_dictionary)
    plain, _ = build_pair(plain_arch, joined)  # fairseq's names and shapes, checked above
    plain_shapes = {name: tensor.shape for name, tensor in plain.state_dict().items()}
    ours = {name: tensor.shape for name, tensor in build_plugin_model(arch, joined).state_dict().items()}
    gate = {name: shape for name, shape in ours.items() if name.startswith("decoder.pointer_generator.")}
    assert {name: shape for name, shape in ours.items() if name not in gate} == plain_shapes
    width = 256 + 256 + 256  # output state, attention context, target embedding of fconv_gigaword
    assert gate == {
        "decoder.pointer_generator.gate.weight_g": (1, 1),
        "decoder.pointer_generator.gate.weight_v": (1, width),
        "decoder.pointer_generator.gate.bias": (1,),
    }
