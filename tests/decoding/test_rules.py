"""Beam search's rules (decoding/rules.py) on hand-checked cases, and each form of the
search against them on the same cases: the torch form (``BeamSearch._constrain`` and
``block_repeated_ngrams``), the compiled candidates (``beam_candidates.cpp``) and the ONNX
runtime's numpy form (``fconv_onnx/beam_search.py``)."""

import math

import numpy as np
import pytest
import torch

from fconv_onnx import beam_search as numpy_search
from fconv_plugin import backend
from fconv_plugin.decoding.rules import SearchRules
from fconv_plugin.decoding.search import BeamSearch, block_repeated_ngrams
from tests.support import needs_compiled

PAD, EOS, UNK = 1, 2, 3
NEG_INF = float("-inf")


def test_lengths_candidates_and_the_score_divisor_by_hand():
    assert SearchRules(EOS, PAD, UNK, max_len_a=1.2, max_len_b=10).max_length(7) == 18  # int(18.4)
    assert SearchRules(EOS, PAD, UNK, max_len_a=1.2, max_len_b=10, max_positions=12).max_length(7) == 11
    five, two = SearchRules(EOS, PAD, UNK, beam=5), SearchRules(EOS, PAD, UNK, beam=2)
    assert [five.candidate_count(step, 6) for step in (0, 1)] == [5, 10]  # step 0: one hypothesis, pad never
    assert [two.candidate_count(step, 3) for step in (0, 1)] == [2, 4]
    assert SearchRules(EOS, PAD, UNK).length_divisor(3) == 4
    assert SearchRules(EOS, PAD, UNK, len_penalty=0.5).length_divisor(3) == 2
    assert SearchRules(EOS, PAD, UNK, normalize_scores=False).length_divisor(3) is None


def test_repeated_ngrams_by_hand():
    def blocked(n, produced):
        return SearchRules(EOS, PAD, UNK, no_repeat_ngram_size=n).blocked(produced)

    assert blocked(0, [4, 4, 4]) == set()
    assert blocked(1, [4, 5, 4]) == {4, 5}
    assert blocked(2, [4, 5, 4]) == {5}  # "4 5" seen: after 4, not 5 again
    assert blocked(3, [4, 5, 4, 5]) == {4}  # "4 5 4" seen
    assert blocked(2, [4]) == set() and blocked(2, []) == set()
    assert blocked(2, [4, 2, 4]) == {2}  # a </s> inside the windows counts like any token
    assert blocked(2, [2]) == {2}  # the opening </s> takes part: "</s> </s>" would repeat


def test_a_steps_rules_by_hand():
    rules = SearchRules(EOS, PAD, UNK, min_len=2, unk_penalty=0.5)
    log_probs = [-1.0, -2.0, -0.5, -1.5, math.nan, -3.0]
    assert rules.next_token_scores(log_probs, 0, 10) == [-1.0, NEG_INF, NEG_INF, -2.0, NEG_INF, -3.0]
    assert rules.next_token_scores(log_probs, 2, 10) == [-1.0, NEG_INF, -0.5, -2.0, NEG_INF, -3.0]
    only_eos = [NEG_INF, NEG_INF, -0.5, NEG_INF, NEG_INF, NEG_INF]
    assert rules.next_token_scores(log_probs, 10, 10) == only_eos  # the last step, before min_len or not
    assert rules.next_token_scores(log_probs, 0, 10, forced=5) == [NEG_INF] * 5 + [-3.0]
    assert rules.next_token_scores(log_probs, 0, 10, forced=2) == [NEG_INF, NEG_INF, -0.5] + [NEG_INF] * 3
    assert rules.next_token_scores(log_probs, 10, 10, forced=5) == only_eos  # no prefix past the length bound
    blocking = SearchRules(EOS, PAD, UNK, no_repeat_ngram_size=2)
    assert blocking.next_token_scores(log_probs, 3, 10, produced=[4, 5, 4]) == [
        -1.0, NEG_INF, -0.5, -1.5, NEG_INF, NEG_INF]


def _cases():
    """(rules, step, max_len, log-probabilities rows x vocab with NaN and -inf, produced tokens rows x step)."""
    generator = torch.Generator().manual_seed(7)
    vocab, rows = 12, 6
    for seed, (step, max_len, min_len, unk_penalty, n) in enumerate(
            [(0, 9, 1, 0.0, 0), (1, 9, 3, 0.5, 0), (3, 9, 1, 1.25, 2), (4, 9, 2, 0.0, 1), (5, 9, 1, 0.0, 3),
             (9, 9, 1, 0.5, 2), (2, 9, 5, 2.0, 0)]):
        log_probs = torch.log_softmax(torch.randn(rows, vocab, generator=generator) * 3, dim=-1)
        log_probs[seed % rows, (seed * 5) % vocab] = math.nan
        log_probs[(seed + 1) % rows, UNK] = NEG_INF
        produced = torch.randint(4, 7, (rows, step), generator=generator)  # few words: n-grams repeat
        rules = SearchRules(EOS, PAD, UNK, beam=2, min_len=min_len, unk_penalty=unk_penalty, no_repeat_ngram_size=n)
        yield rules, step, max_len, log_probs, produced


def _stated(rules, step, max_len, log_probs, produced, forced=None) -> torch.Tensor:
    return torch.tensor([rules.next_token_scores(row.tolist(), step, max_len, hypothesis.tolist(),
                                                 None if forced is None else int(forced[i]))
                         for i, (row, hypothesis) in enumerate(zip(log_probs, produced))], dtype=torch.float32)


class _Search(BeamSearch):
    """The settings the torch form's rules read; no model."""

    def __init__(self, rules: SearchRules, vocab_size: int):
        self.pad, self.unk, self.eos, self.vocab_size, self.beam = rules.pad, rules.unk, rules.eos, vocab_size, rules.beam
        self.unk_penalty, self.min_len, self.rules = rules.unk_penalty, rules.min_len, rules


@pytest.mark.parametrize("prefix", [False, True], ids=["free", "forced prefix"])
def test_the_torch_form_applies_the_rules(prefix):
    for rules, step, max_len, log_probs, produced in _cases():
        search = _Search(rules, log_probs.size(1))
        forced = prefix_tokens = None
        if prefix:  # every sentence's prefix has a token at this step (rows are sentences x beam)
            prefix_tokens = torch.arange(log_probs.size(0) // rules.beam).add(4).unsqueeze(1).repeat(1, step + 1)
            forced = prefix_tokens[:, step].repeat_interleave(rules.beam) if step < max_len else None
        actual = log_probs.clone()
        search._constrain(actual, step, max_len, None, prefix_tokens)
        if rules.no_repeat_ngram_size:
            block_repeated_ngrams(torch.cat([torch.full((len(produced), 1), EOS), produced], dim=1), actual,
                                  rules.no_repeat_ngram_size)
        assert torch.equal(actual, _stated(rules, step, max_len, log_probs, produced, forced)), (step, rules)


def _best(scores: torch.Tensor, beam: int, k: int, first_only: bool):
    """The k best (value, beam, token) of each sentence, best first, ties by the lower index."""
    by_sentence = scores.view(-1, beam, scores.size(1))
    if first_only:
        by_sentence = by_sentence[:, :1]
    flat = by_sentence.reshape(by_sentence.size(0), -1).tolist()
    width = scores.size(1)
    best = [sorted(range(len(row)), key=lambda i: (-row[i], i))[:k] for row in flat]
    values = [[row[i] for i in indices] for row, indices in zip(flat, best)]
    return values, [[(i // width, i % width) for i in indices] for indices in best]


def _same_candidates(values, places, expected_values, expected_places):
    assert values == expected_values  # bit for bit (float32 values as Python floats)
    for row, expected_row, value_row in zip(places, expected_places, expected_values):
        assert [p for p, v in zip(row, value_row) if v != NEG_INF] == [
            p for p, v in zip(expected_row, value_row) if v != NEG_INF]


@needs_compiled("beam_candidates")
def test_the_compiled_candidates_apply_the_rules():
    """beam_candidates.cpp's one pass (the steps before the last, no prefix; n-grams are
    blocked before it, in the torch form) against the rules' rows plus the beams' scores."""
    compiled = backend.loop("beam_candidates")
    generator = torch.Generator().manual_seed(3)
    for rules, step, max_len, log_probs, produced in _cases():
        if step >= max_len or rules.no_repeat_ngram_size:
            continue
        beam, vocab = rules.beam, log_probs.size(1)
        previous = None if step == 0 else torch.randn(log_probs.size(0), generator=generator) - 4
        k = rules.candidate_count(step, vocab)
        values, beams, tokens = compiled.best_candidates(log_probs.clone(), previous, beam, k, PAD, UNK,
                                                         rules.unk_penalty, EOS, step < rules.min_len)
        stated = _stated(rules, step, max_len, log_probs, produced)
        if previous is not None:
            stated = stated + previous.unsqueeze(1)
        expected_values, expected_places = _best(stated, beam, k, first_only=step == 0)
        _same_candidates(values.tolist(), [list(zip(b, t)) for b, t in zip(beams.tolist(), tokens.tolist())],
                         expected_values, expected_places)


def test_the_numpy_form_applies_the_rules():
    """The ONNX runtime's rules row (added to every hypothesis' log-probabilities in the step
    graph) and its choice from full rows that hold a NaN, against the rules (it blocks no
    n-grams and forces no prefix)."""
    generator = torch.Generator().manual_seed(5)
    for rules, step, max_len, log_probs, produced in _cases():
        if rules.no_repeat_ngram_size:
            continue
        vocab, beam = log_probs.size(1), rules.beam
        penalty = numpy_search._token_penalty(vocab, step, PAD, UNK, EOS, rules.unk_penalty, rules.min_len, max_len)
        stated = _stated(rules, step, max_len, log_probs, produced)
        finite = torch.where(log_probs.isnan(), 0.0, log_probs).numpy()  # the added row, where no NaN is
        added = torch.from_numpy(finite + penalty)
        no_nan = ~log_probs.isnan()
        assert torch.equal(added[no_nan], stated[no_nan]), (step, rules)
        beam_scores = (torch.randn(log_probs.size(0) // beam, beam, generator=generator) - 4).numpy()
        if step == 0:
            beam_scores[:, 1:] = -np.inf  # the numpy form's first step: the first hypothesis alone
        k = rules.candidate_count(step, vocab)
        values, flat = numpy_search._candidates_from_log_probs(log_probs.numpy().copy(), penalty, beam_scores, k)
        expected_values, expected_places = _best(stated + torch.from_numpy(beam_scores).reshape(-1, 1), beam, k,
                                                 first_only=step == 0)
        _same_candidates(values.tolist(), [[(int(i) // vocab, int(i) % vocab) for i in row] for row in flat],
                         expected_values, expected_places)
