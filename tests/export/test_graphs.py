"""Exported graphs in onnxruntime against fairseq's own fconv with the same weights."""

import numpy as np
import onnx
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


def _hypotheses(src, lengths, copies, tgt_length, seed):
    """``copies`` different decoder inputs for each sentence: (its source repeated, the inputs)."""
    sources, source_lengths = src.repeat_interleave(copies, dim=0), lengths.repeat_interleave(copies)
    _, _, prev, _ = translation_batch(SRC, TGT, [1] * sources.size(0), [tgt_length] * sources.size(0), seed=seed)
    return sources, source_lengths, prev


def _step_log_probs(decoder, keys, values, src, prev, copies, shapes, copying=False):
    """The step graph run token by token over ``prev`` (sentences · copies x t): log-probabilities per step."""
    sentences = src.size(0)
    states = [np.zeros((sentences, copies, k, channels), np.float32) for k, channels in shapes]
    by_sentence = prev.view(sentences, copies, -1).numpy()
    copied = {"src_tokens": src.numpy()} if copying else {}
    for t in range(prev.size(1)):
        log_probs, *states = decoder.run(None, {
            "prev_tokens": by_sentence[:, :, : t + 1], "keys": keys, "values": values,
            "padding_mask": src.eq(SRC.pad()).numpy(), **copied, **{f"state_{i}": s for i, s in enumerate(states)}})
        yield t, log_probs


@pytest.mark.parametrize("src_lengths, tgt_length, copies", [([7, 3, 9], 6, 4), ([12], 9, 1), ([2, 5, 5, 4, 1, 8], 4, 2)])
def test_encoder_and_decoder_steps_give_fairseqs_log_probabilities(exported, src_lengths, tgt_length, copies):
    """Every sentence's hypotheses (``copies`` of them, each with its own tokens) read the
    sentence's one row of keys and values."""
    reference, sessions, shapes = exported
    src, lengths, _, _ = translation_batch(SRC, TGT, src_lengths, [1] * len(src_lengths), seed=len(src_lengths))
    sources, source_lengths, prev = _hypotheses(src, lengths, copies, tgt_length, seed=copies)
    with torch.no_grad():
        expected = reference.get_normalized_probs(reference(sources, source_lengths, prev), log_probs=True).numpy()
        z = reference.encoder(src, lengths)["encoder_out"][0].numpy()
    keys, values = sessions["encoder"].run(None, {"src_tokens": src.numpy()})
    assert keys.shape == (len(src_lengths), SMALL["encoder_embed_dim"], src.size(1))
    assert np.allclose(keys.transpose(0, 2, 1), z, atol=1e-5)
    # decoder layers (32, 3), (48, 2), (48, 1): the last k - 1 inputs of width 32 (fc1's), then 32; none for k = 1
    assert shapes == [(2, 32), (1, 32)]
    for t, log_probs in _step_log_probs(sessions["decoder"], keys, values, src, prev, copies, shapes):
        assert np.allclose(log_probs, expected[:, t], atol=1e-4), t


def test_a_copying_models_step_reads_the_source_tokens_and_gives_the_models_log_probabilities(tmp_path):
    """The pointer-generator is the plugin's own (fairseq has none): the step graph against
    the torch model's full-sequence pass, a separate path (time-major convolutions)."""
    torch.manual_seed(2)
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, SRC), pointer_generator=True, **SMALL).eval()
    src, lengths, prev, _ = translation_batch(SRC, SRC, [6, 9, 3], [5, 5, 5], seed=4)
    src[0, -3:-1] = src[0, -5]  # a word twice in one source: its copy probabilities add up
    with torch.no_grad():  # extremes a trained model reaches: rare names all but impossible to generate,
        model.decoder.fc3.bias[src[1, -4:-1]] = -150.0  # (the copy term's softplus reads ~150)
        model.decoder.pointer_generator.gate.bias.fill_(100.0)  # and p_gen ~ 1: log(1 - p_gen) ~ -100
    shapes = export_graphs(model, DictionaryTask(SRC, SRC), str(tmp_path))
    encoder, decoder = (onnxruntime.InferenceSession(str(tmp_path / f"{name}.onnx"), providers=["CPUExecutionProvider"])
                        for name in ("encoder", "decoder"))
    assert [i.name for i in decoder.get_inputs()][:5] == ["prev_tokens", "keys", "values", "padding_mask", "src_tokens"]
    copies = 2  # each sentence's two hypotheses copy from its one row of source tokens
    sources, source_lengths, prev = _hypotheses(src, lengths, copies, 5, seed=4)
    with torch.no_grad():
        expected = model.get_normalized_probs(model(sources, source_lengths, prev), log_probs=True).numpy()
    keys, values = encoder.run(None, {"src_tokens": src.numpy()})
    for t, log_probs in _step_log_probs(decoder, keys, values, src, prev, copies, shapes, copying=True):
        assert np.isfinite(log_probs).all() and np.allclose(log_probs, expected[:, t], atol=1e-4), t


@pytest.mark.parametrize("copies", [1, 3])
def test_int8_graphs_give_the_torch_int8_models_log_probabilities(tmp_path, copies):
    """The int8 export runs ``quantize_int8_``'s arithmetic, not a quantiser of its own."""
    torch.manual_seed(3)
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT), **SMALL).eval()
    shapes = export_graphs(model, DictionaryTask(SRC, TGT), str(tmp_path), int8=True)
    model.quantize_int8_()
    encoder, decoder = (onnxruntime.InferenceSession(str(tmp_path / f"{name}.onnx"), providers=["CPUExecutionProvider"])
                        for name in ("encoder", "decoder"))
    assert "MatMulInteger" in {node.op_type for node in onnx.load(str(tmp_path / "decoder.onnx")).graph.node}
    src, lengths, _, _ = translation_batch(SRC, TGT, [7, 3, 9], [1, 1, 1], seed=5)
    sources, source_lengths, prev = _hypotheses(src, lengths, copies, 6, seed=6)
    with torch.no_grad():
        expected = model.get_normalized_probs(model(sources, source_lengths, prev), log_probs=True).numpy()
    keys, values = encoder.run(None, {"src_tokens": src.numpy()})
    for t, log_probs in _step_log_probs(decoder, keys, values, src, prev, copies, shapes):
        assert np.abs(log_probs - expected[:, t]).max() < 1e-5, t


def test_the_step_graph_needs_the_folded_copy():
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT), **SMALL)
    with pytest.raises(FConvError, match="exportable_copy"):
        DecoderStepGraph(model)
    EncoderGraph(exportable_copy(model))  # the encoder has no state to check
