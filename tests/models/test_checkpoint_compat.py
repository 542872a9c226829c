"""Old checkpoint layouts, pretrained embeddings and inconsistent options."""

import pytest
import torch

from fconv_plugin.errors import FConvError
from tests.support import DictionaryTask, build_pair, build_plugin_model, make_dictionary, relative_error, translation_batch

SRC, TGT = make_dictionary(30, "s"), make_dictionary(30, "t")
TASK = DictionaryTask(SRC, TGT)
SMALL = dict(encoder_layers="[(32, 3)] * 2", decoder_layers="[(32, 3), (48, 3), (48, 1)]",
             encoder_embed_dim=16, decoder_embed_dim=16, decoder_out_embed_dim=16)


def _fairseq_model_in_the_pre_2018_layout():
    """fairseq's own fconv with its decoder convolutions weight-normalised over dim 0, the
    layout of pre-2018 checkpoints (e.g. the wmt14.en-de release), made the way fairseq's
    FConvDecoder.upgrade_state_dict makes it: remove_weight_norm, then weight_norm(dim=0)."""
    torch.manual_seed(0)
    ours, reference = build_pair("fconv", TASK, **SMALL)
    for index, conv in enumerate(reference.decoder.convolutions):
        torch.nn.utils.remove_weight_norm(conv)
        reference.decoder.convolutions[index] = torch.nn.utils.weight_norm(conv, dim=0)
        with torch.no_grad():  # give every kernel position its own gain
            conv.weight_g.mul_(torch.linspace(0.5, 1.5, conv.weight_g.size(0)).view(-1, 1, 1))
    return ours, reference


def test_a_pre_2018_checkpoint_gives_the_outputs_fairseqs_model_gives():
    ours, reference = _fairseq_model_in_the_pre_2018_layout()
    old = reference.state_dict()
    old["decoder.version"] = torch.Tensor([1])
    assert old["decoder.convolutions.0.weight_g"].shape == (3, 1, 1)
    ours.load_state_dict(old, strict=True)
    assert ours.decoder.convolutions[0].weight_g.shape == (1, 1, 64)
    src, lengths, prev, _ = translation_batch(SRC, TGT, [6, 4], [5, 3])
    ours.eval(), reference.eval()
    with torch.no_grad():
        expected, _ = reference(src, lengths, prev)
        actual, _ = ours(src, lengths, prev)
    assert relative_error(actual, expected) < 1e-5


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
