"""fconv_onnx's numpy beam search against fairseq's SequenceGenerator, driving the same model.

Both searches run fairseq's own fconv (with random weights, </s> made likely so that
hypotheses end at different steps); the numpy search reaches it through a small
adapter, which chooses the candidates with the exporter's own ``select_candidates``
(what the step graph runs). Every finished hypothesis must match: tokens, score,
per-token scores.
"""

import numpy as np
import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from fconv_onnx.beam_search import generate
from fconv_plugin.export.graphs import select_candidates
from tests.support import DictionaryTask, build_pair, make_dictionary, translation_batch

SRC, TGT = make_dictionary(40, "s"), make_dictionary(30, "t")
SMALL = dict(encoder_embed_dim=24, decoder_embed_dim=24, decoder_out_embed_dim=16,
             encoder_layers="[(32, 3)] * 2", decoder_layers="[(32, 3), (32, 2)]")


class FairseqModelSteps:
    """start / step / reorder over a fairseq model's incremental decoding, in numpy, with
    the step graph's interface: the candidates chosen as the graph chooses them."""

    def __init__(self, model):
        self.model = model
        self.vocabulary_size = len(TGT)

    def start(self, src_tokens, copies):
        src = torch.from_numpy(src_tokens)
        encoder_out = self.model.encoder(src, src.ne(SRC.pad()).sum(dim=1))
        order = torch.arange(src.size(0)).repeat_interleave(copies)
        self.encoder_out = self.model.encoder.reorder_encoder_out(encoder_out, order)
        self.state = {}

    def step(self, prev_tokens, token_penalty, beam_scores):
        out = self.model.decoder(torch.from_numpy(prev_tokens), self.encoder_out, incremental_state=self.state)
        self.log_probs = self.model.get_normalized_probs((out[0][:, -1:, :], None), log_probs=True)[:, -1, :]
        return [t.numpy() for t in select_candidates(self.log_probs, torch.from_numpy(token_penalty),
                                                     torch.from_numpy(beam_scores))]

    def last_log_probs(self):
        return self.log_probs.numpy()

    def reorder(self, order, sentences_left):
        order = torch.from_numpy(order)
        self.model.decoder.reorder_incremental_state_scripting(self.state, order)
        self.encoder_out = self.model.encoder.reorder_encoder_out(self.encoder_out, order)


@pytest.fixture(scope="module")
def reference():
    torch.manual_seed(0)
    _, model = build_pair("fconv_iwslt_de_en", DictionaryTask(SRC, TGT), **SMALL)
    with torch.no_grad():
        model.decoder.fc3.weight_g.mul_(3.0)  # peaked distributions: fewer near-ties
    return model.eval()


def _both_searches(reference, src, lengths, beam, **options):
    """(this search's hypotheses, fairseq's SequenceGenerator's), over the same model."""
    with torch.no_grad():
        actual = generate(FairseqModelSteps(reference), src.numpy(), beam, eos=TGT.eos(), pad=TGT.pad(), unk=TGT.unk(),
                          max_positions=reference.decoder.max_positions(), **options)
        expected = SequenceGenerator([reference], TGT, beam_size=beam, normalize_scores=True, **options).generate(
            [reference], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
    return actual, expected


def _assert_same_hypotheses(actual, expected, beam) -> set:
    """Every sentence's finished hypotheses equal fairseq's; returns their lengths."""
    lengths_seen = set()
    for sentence, (ours, theirs) in enumerate(zip(actual, expected)):
        assert len(ours) == len(theirs) == beam, sentence
        for mine, fairseqs in zip(ours, theirs):
            assert mine.tokens.tolist() == fairseqs["tokens"].tolist(), sentence
            assert mine.score == pytest.approx(float(fairseqs["score"]), abs=1e-5)
            assert np.allclose(mine.positional_scores, fairseqs["positional_scores"].numpy(), atol=1e-5)
            lengths_seen.add(len(mine.tokens))
    return lengths_seen


@pytest.mark.parametrize("beam, lenpen, max_len_a, max_len_b, unkpen, min_len", [
    (5, 1.0, 0, 40, 0.0, 1),
    (1, 1.0, 0, 40, 0.0, 1),
    (4, 0.6, 1.0, 2, 0.0, 1),  # short maximum length: sentences stopped there
    (3, 1.4, 0, 12, 1.5, 1),
    (4, 1.0, 0, 12, 0.0, 4),  # no </s> before 4 tokens
])
def test_every_finished_hypothesis_matches_fairseqs_sequence_generator(reference, beam, lenpen, max_len_a, max_len_b,
                                                                        unkpen, min_len):
    src, lengths, _, _ = translation_batch(SRC, TGT, [7, 3, 9, 5, 9, 2], [1] * 6, seed=beam)
    actual, expected = _both_searches(reference, src, lengths, beam, max_len_a=max_len_a, max_len_b=max_len_b,
                                      min_len=min_len, len_penalty=lenpen, unk_penalty=unkpen)
    lengths_seen = _assert_same_hypotheses(actual, expected, beam)
    assert len(lengths_seen) > 2  # hypotheses really ended at different steps
    assert min(lengths_seen) > min_len


def test_a_step_with_nan_log_probabilities_follows_fairseqs_rule(reference):
    """A hypothesis whose log-probabilities are NaN (fairseq makes them -inf: it is never
    continued) takes the search's own path from the full rows; the step graph's
    candidates do not rule on NaN. Both searches read the same poisoned decoder."""
    steps = []

    def poison(module, inputs, output):  # at the third step, the second hypothesis of every sentence
        steps.append(output)
        if len(steps) == 3:
            output = output.clone()
            output.view(-1, 4, *output.shape[1:])[:, 1] = float("nan")
            return output

    src, lengths, _, _ = translation_batch(SRC, TGT, [7, 3, 9, 5], [1] * 4, seed=3)
    options = dict(max_len_a=0, max_len_b=12, min_len=1, len_penalty=1.0, unk_penalty=0.0)
    handle = reference.decoder.fc3.register_forward_hook(poison)
    try:
        with torch.no_grad():
            actual = generate(FairseqModelSteps(reference), src.numpy(), 4, eos=TGT.eos(), pad=TGT.pad(),
                              unk=TGT.unk(), max_positions=reference.decoder.max_positions(), **options)
            steps.clear()
            expected = SequenceGenerator([reference], TGT, beam_size=4, normalize_scores=True, **options).generate(
                [reference], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
    finally:
        handle.remove()
    assert len(steps) > 3
    _assert_same_hypotheses(actual, expected, 4)
    assert all(np.isfinite(h.score) for hypotheses in actual for h in hypotheses)


def test_min_len_above_the_maximum_length_is_refused(reference):
    src, _, _, _ = translation_batch(SRC, TGT, [4], [1])
    with pytest.raises(ValueError, match="min_len 5 is larger than the maximum length 3"):
        generate(FairseqModelSteps(reference), src.numpy(), 2, eos=2, pad=1, unk=3, max_len_b=3, min_len=5)
