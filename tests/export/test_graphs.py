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


def _step_log_probs(decoder, source, src, prev, copies, shapes, copying=False, search=None):
    """The step graph run token by token over ``prev`` (sentences · copies x t) with the encoder
    graph's ``source`` (keys, values, length scales): log-probabilities per step (with ``search``, a
    function of the step giving the search's inputs: and the candidates and sums)."""
    sentences = src.size(0)
    states = [np.zeros((sentences * copies, k * channels), np.float32) for k, channels in shapes]
    by_sentence = prev.view(sentences, copies, -1).numpy()
    keys, values, length_scale = source
    copied = {"src_tokens": src.numpy()} if copying else {}
    for t in range(prev.size(1)):
        token_penalty, beam_scores = (search or _no_rules(decoder))(t, sentences, copies)
        log_probs, cand_scores, cand_index, sums, *states = decoder.run(None, {
            "tokens": by_sentence[:, :, t], "position": np.array(TGT.pad() + t + 1), "keys": keys, "values": values,
            "length_scale": length_scale, "padding_mask": src.eq(SRC.pad()).numpy(), **copied,
            "token_penalty": token_penalty, "beam_scores": beam_scores, "order": np.arange(sentences * copies),
            **{f"state_{i}": s for i, s in enumerate(states)}})
        yield (t, log_probs, (cand_scores, cand_index, sums)) if search else (t, log_probs)


def _no_rules(decoder):
    """The search's inputs that leave the log-probabilities as they are."""
    vocabulary = next(i.shape[0] for i in decoder.get_inputs() if i.name == "token_penalty")
    return lambda t, sentences, copies: (np.zeros(vocabulary, np.float32), np.zeros((sentences, copies), np.float32))


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
    source = sessions["encoder"].run(None, {"src_tokens": src.numpy()})
    keys = source[0]
    assert keys.shape == (len(src_lengths), SMALL["encoder_embed_dim"], src.size(1))
    assert np.allclose(keys.transpose(0, 2, 1), z, atol=1e-5)
    # s · √(1/s) for each sentence's s unpadded source tokens (§3.4)
    assert np.allclose(source[2].ravel(), np.sqrt(lengths.numpy().astype(np.float64)), rtol=1e-6)
    # decoder layers (32, 3), (48, 2), (48, 1): the last k - 1 inputs of width 32 (fc1's), then 32; none for k = 1
    assert shapes == [(2, 32), (1, 32)]
    for t, log_probs in _step_log_probs(sessions["decoder"], source, src, prev, copies, shapes):
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
    assert [i.name for i in decoder.get_inputs()][:7] == ["tokens", "position", "keys", "values", "length_scale",
                                                          "padding_mask", "src_tokens"]
    copies = 2  # each sentence's two hypotheses copy from its one row of source tokens
    sources, source_lengths, prev = _hypotheses(src, lengths, copies, 5, seed=4)
    with torch.no_grad():
        expected = model.get_normalized_probs(model(sources, source_lengths, prev), log_probs=True).numpy()
    source = encoder.run(None, {"src_tokens": src.numpy()})
    for t, log_probs in _step_log_probs(decoder, source, src, prev, copies, shapes, copying=True):
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
    source = encoder.run(None, {"src_tokens": src.numpy()})
    for t, log_probs in _step_log_probs(decoder, source, src, prev, copies, shapes):
        assert np.abs(log_probs - expected[:, t]).max() < 1e-5, t


def test_the_step_graph_chooses_each_sentences_best_candidates(exported):
    """The candidates are the 2 x beam best of (log-probabilities + the rules' row) + the
    hypothesis' score over a sentence's beam x vocabulary, best first and the lower flat
    index first among equals (what fairseq's top-k gives on the CPU), checked against the
    graph's own log-probabilities: with barred tokens, a penalised one, and at the first
    step only the first hypothesis' row (the others' scores -inf) and fewer tokens allowed
    than candidates asked for (so that equal -inf scores are chosen too, as in a tiny
    vocabulary)."""
    _, sessions, shapes = exported
    src, lengths, _, _ = translation_batch(SRC, TGT, [6, 2, 8], [1, 1, 1], seed=7)
    copies = 3
    _, _, prev = _hypotheses(src, lengths, copies, 5, seed=8)
    source = sessions["encoder"].run(None, {"src_tokens": src.numpy()})

    def search(t, sentences, copies):
        penalty = np.zeros(len(TGT), np.float32)
        penalty[TGT.pad()], penalty[TGT.unk()], penalty[TGT.eos()] = -np.inf, -1.25, -np.inf if t < 2 else 0.0
        if t == 0:  # fewer tokens allowed than candidates asked for: the rest are -inf, lowest index first
            penalty[:] = -np.inf
            penalty[TGT.nspecial: TGT.nspecial + 3] = 0.0
            beam_scores = np.full((sentences, copies), -np.inf, np.float32)
            beam_scores[:, 0] = 0.0
        else:
            beam_scores = -np.random.default_rng(t).random((sentences, copies), dtype=np.float32) * t
        return penalty, beam_scores

    for t, log_probs, (cand_scores, cand_index, sums) in _step_log_probs(
            sessions["decoder"], source, src, prev, copies, shapes, search=search):
        penalty, beam_scores = search(t, src.size(0), copies)
        flat = ((log_probs + penalty).reshape(src.size(0), copies, -1) + beam_scores[:, :, None]).reshape(src.size(0), -1)
        order = np.lexsort((np.broadcast_to(np.arange(flat.shape[1]), flat.shape), -flat), axis=1)[:, : 2 * copies]
        assert cand_index.tolist() == order.tolist(), t
        assert np.array_equal(cand_scores, np.take_along_axis(flat, order, axis=1)), t
        assert np.allclose(sums, log_probs.sum(axis=1), rtol=1e-5), t
        if t == 0:  # all from the first hypothesis: three allowed tokens, then -inf ones
            assert np.isfinite(cand_scores[:, :3]).all() and cand_index[:, 3:].tolist() == [[0, 1, 2]] * src.size(0)


def test_the_step_graph_needs_the_folded_copy():
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT), **SMALL)
    with pytest.raises(FConvError, match="exportable_copy"):
        DecoderStepGraph(model)
    EncoderGraph(exportable_copy(model))  # the encoder has no state to check


def test_the_step_graph_gathers_the_states_in_the_beams_order(exported):
    """A step given the beams' order (row r extends the previous step's row order[r], and
    sentences may have left: fewer rows than before) gives what the same step gives on the
    states reordered beforehand."""
    _, sessions, shapes = exported
    src, _, _, _ = translation_batch(SRC, TGT, [6, 4], [1, 1], seed=9)
    copies, rows_before = 3, 9  # a third sentence has left
    rng = np.random.default_rng(9)
    states = [rng.standard_normal((rows_before, k * channels)).astype(np.float32) for k, channels in shapes]
    order = np.array([2, 2, 0, 7, 6, 6])
    source = sessions["encoder"].run(None, {"src_tokens": src.numpy()})
    feeds = {"tokens": rng.integers(TGT.nspecial, len(TGT), (2, copies)), "position": np.array(TGT.pad() + 4),
             "keys": source[0], "values": source[1], "length_scale": source[2],
             "padding_mask": src.eq(SRC.pad()).numpy(), "token_penalty": np.zeros(len(TGT), np.float32),
             "beam_scores": np.zeros((2, copies), np.float32)}
    gathered = sessions["decoder"].run(None, {**feeds, "order": order,
                                              **{f"state_{i}": s for i, s in enumerate(states)}})
    beforehand = sessions["decoder"].run(None, {**feeds, "order": np.arange(6),
                                                **{f"state_{i}": s[order] for i, s in enumerate(states)}})
    assert all(np.array_equal(a, b) for a, b in zip(gathered, beforehand))
    assert gathered[4].shape == (6, shapes[0][0] * shapes[0][1])
