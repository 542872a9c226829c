"""Exported graphs in onnxruntime against fairseq's own fconv with the same weights."""

import numpy as np
import onnxruntime
import pytest
import torch

from fconv_plugin.errors import FConvError
from fconv_plugin.export.graphs import DecoderStepGraph, EncoderGraph, exportable_copy
from fconv_plugin.export.main import export_graphs
from tests.support import DictionaryTask, build_pair, build_plugin_model, make_dictionary, translation_batch

SRC, TGT = make_dictionary(40, "s"), make_dictionary(30, "t")
SMALL = dict(encoder_embed_dim=24, decoder_embed_dim=24, decoder_out_embed_dim=16,
             encoder_layers="[(32, 3)] * 2 + [(48, 2)]", decoder_layers="[(32, 3), (48, 2), (48, 1)]")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(1)
    ours, reference = build_pair("fconv_iwslt_de_en", DictionaryTask(SRC, TGT), **SMALL)
    directory = tmp_path_factory.mktemp("graphs")
    shapes = export_graphs(ours.eval(), DictionaryTask(SRC, TGT), str(directory))
    sessions = {name: onnxruntime.InferenceSession(str(directory / f"{name}.onnx"), providers=["CPUExecutionProvider"])
                for name in ("encoder", "decoder")}
    return reference.eval(), sessions, shapes


@pytest.mark.parametrize("src_lengths, tgt_lengths", [([7, 3, 9], [6, 6, 6]), ([12], [9]), ([2, 5, 5, 4, 1, 8], [4] * 6)])
def test_encoder_and_decoder_steps_give_fairseqs_log_probabilities(exported, src_lengths, tgt_lengths):
    reference, sessions, shapes = exported
    src, lengths, prev, _ = translation_batch(SRC, TGT, src_lengths, tgt_lengths, seed=len(src_lengths))
    with torch.no_grad():
        expected = reference.get_normalized_probs(reference(src, lengths, prev), log_probs=True).numpy()
        z = reference.encoder(src, lengths)["encoder_out"][0].numpy()
    keys, values = sessions["encoder"].run(None, {"src_tokens": src.numpy()})
    assert keys.shape == (len(src_lengths), SMALL["encoder_embed_dim"], src.size(1))
    assert np.allclose(keys.transpose(0, 2, 1), z, atol=1e-5)
    states = [np.zeros((len(src_lengths), k, channels), np.float32) for k, channels in shapes]
    # decoder layers (32, 3), (48, 2), (48, 1): the last k - 1 inputs of width 32 (fc1's), then 32; none for k = 1
    assert [s.shape[1:] for s in states] == [(2, 32), (1, 32)]
    for t in range(prev.size(1)):
        log_probs, *states = sessions["decoder"].run(None, {
            "prev_tokens": prev[:, : t + 1].numpy(), "keys": keys, "values": values,
            "padding_mask": src.eq(SRC.pad()).numpy(), **{f"state_{i}": s for i, s in enumerate(states)}})
        assert np.allclose(log_probs, expected[:, t], atol=1e-4), t


def test_pointer_generator_models_are_refused_with_one_line():
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, SRC), pointer_generator=True, **SMALL)
    with pytest.raises(FConvError, match="does not export pointer-generator"):
        exportable_copy(model)


def test_the_step_graph_needs_the_folded_copy():
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT), **SMALL)
    with pytest.raises(FConvError, match="exportable_copy"):
        DecoderStepGraph(model)
    EncoderGraph(exportable_copy(model))  # the encoder has no state to check
