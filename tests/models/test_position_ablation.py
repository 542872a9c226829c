"""--no-encoder/decoder-positional-embeddings: the paper's ablation without position embeddings."""

import torch

from tests.support import DictionaryTask, build_plugin_model, make_dictionary, translation_batch

SRC, TGT = make_dictionary(30, "s"), make_dictionary(30, "t")
TASK = DictionaryTask(SRC, TGT)
SMALL = dict(encoder_layers="[(32, 3)] * 2", decoder_layers="[(32, 3)] * 2",
             encoder_embed_dim=16, decoder_embed_dim=16, decoder_out_embed_dim=16)


def test_without_positions_the_model_equals_one_whose_position_tables_are_zero():
    torch.manual_seed(0)
    with_positions = build_plugin_model("fconv", TASK, **SMALL).eval()
    without = build_plugin_model("fconv", TASK, no_encoder_positional_embeddings=True,
                                 no_decoder_positional_embeddings=True, **SMALL).eval()
    assert without.encoder.embed_positions is None and without.decoder.embed_positions is None
    assert not any("embed_positions" in name for name in without.state_dict())
    assert without.max_positions() == (float("inf"), float("inf"))
    state = {k: v for k, v in with_positions.state_dict().items() if "embed_positions" not in k}
    without.load_state_dict(state, strict=True)
    with torch.no_grad():
        with_positions.encoder.embed_positions.weight.zero_()
        with_positions.decoder.embed_positions.weight.zero_()
        src, lengths, prev, _ = translation_batch(SRC, TGT, [5, 7], [4, 6])
        assert torch.allclose(without(src, lengths, prev)[0], with_positions(src, lengths, prev)[0], atol=1e-6)


def test_each_side_switches_on_its_own():
    model = build_plugin_model("fconv", TASK, no_encoder_positional_embeddings=True, **SMALL)
    assert model.encoder.embed_positions is None and model.decoder.embed_positions is not None
