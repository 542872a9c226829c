"""Old checkpoint layouts, pretrained embeddings and inconsistent options."""

import pytest
import torch

from fconv_plugin.errors import FConvError
from fconv_plugin.modules.weight_norm import norm_except_dim
from tests.support import DictionaryTask, build_plugin_model, make_dictionary, translation_batch

SRC, TGT = make_dictionary(30, "s"), make_dictionary(30, "t")
TASK = DictionaryTask(SRC, TGT)
SMALL = dict(encoder_layers="[(32, 3)] * 2", decoder_layers="[(32, 3), (48, 3), (48, 1)]",
             encoder_embed_dim=16, decoder_embed_dim=16, decoder_out_embed_dim=16)


def _pre_2018_layout(state_dict):
    """Decoder convolutions weight-normalised over dim 0, as the wmt14.en-de release stored them."""
    old = dict(state_dict)
    index = 0
    while f"decoder.convolutions.{index}.weight_v" in old:
        v = old[f"decoder.convolutions.{index}.weight_v"]
        g = old[f"decoder.convolutions.{index}.weight_g"]
        weight = v * (g / norm_except_dim(v, 2))
        old[f"decoder.convolutions.{index}.weight_g"] = norm_except_dim(weight, 0)  # (k, 1, 1)
        old[f"decoder.convolutions.{index}.weight_v"] = weight * 3.0  # any v with the same direction
        index += 1
    old["decoder.version"] = torch.Tensor([1])
    return old


def test_pre_2018_decoder_weight_norm_is_upgraded_to_the_same_outputs():
    torch.manual_seed(0)
    model = build_plugin_model("fconv", TASK, **SMALL).eval()
    old = _pre_2018_layout(model.state_dict())
    assert old["decoder.convolutions.0.weight_g"].shape == (3, 1, 1)
    src, lengths, prev, _ = translation_batch(SRC, TGT, [6, 4], [5, 3])
    with torch.no_grad():
        expected, _ = model(src, lengths, prev)
    torch.manual_seed(1)
    fresh = build_plugin_model("fconv", TASK, **SMALL).eval()
    fresh.load_state_dict(old, strict=True)
    assert fresh.decoder.convolutions[0].weight_g.shape == (1, 1, 64)
    with torch.no_grad():
        actual, _ = fresh(src, lengths, prev)
    assert torch.allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"share_input_output_embed": True, "decoder_out_embed_dim": 32},
         "--share-input-output-embed needs --decoder-out-embed-dim equal to --decoder-embed-dim, got 32 and 16"),
        ({"decoder_attention": "[True, False]"}, "has 2 entries but the decoder has 3 layers"),
        ({"encoder_layers": "[(32, 0)]"}, "kernel width must be positive, got 0"),
        ({"decoder_layers": "[(-8, 3)]"}, "out_channels must be positive, got -8"),
        ({"dropout": 1.5}, "--dropout must be in [0, 1), got 1.5"),
        ({"encoder_embed_dim": 0}, "--encoder-embed-dim must be a positive whole number, got 0"),
    ],
)
def test_inconsistent_options_get_one_line_errors(overrides, message):
    with pytest.raises(FConvError) as error:
        build_plugin_model("fconv", TASK, **{**SMALL, **overrides})
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_pretrained_embeddings_are_loaded_and_checked(tmp_path):
    path = tmp_path / "emb.txt"
    path.write_text("2 16\ns3 " + " ".join(["0.5"] * 16) + "\nnotinvocab " + " ".join(["1"] * 16) + "\n")
    model = build_plugin_model("fconv", TASK, encoder_embed_path=str(path), **SMALL)
    assert torch.equal(model.encoder.embed_tokens.weight[SRC.index("s3")], torch.full((16,), 0.5))
    (tmp_path / "bad.txt").write_text("1 4\ns3 1 2 3 4\n")
    with pytest.raises(FConvError, match="the vector of 's3' has 4 values but the embedding dimension is 16"):
        build_plugin_model("fconv", TASK, encoder_embed_path=str(tmp_path / "bad.txt"), **SMALL)
    with pytest.raises(FConvError, match="does not exist"):
        build_plugin_model("fconv", TASK, decoder_embed_path=str(tmp_path / "missing.txt"), **SMALL)


def test_a_sentence_longer_than_the_position_table_is_named():
    model = build_plugin_model("fconv", TASK, max_source_positions=8, **SMALL)
    src, lengths, prev, _ = translation_batch(SRC, TGT, [9], [3])
    with pytest.raises(FConvError) as error:
        model(src, lengths, prev)
    assert str(error.value) == (
        "a source sentence has 9 tokens but the model's position table holds 6 (--max-source-positions); "
        "shorten or split it, or skip such sentences with --skip-invalid-size-inputs-valid-test"
    )
