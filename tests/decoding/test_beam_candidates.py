"""The compiled candidate selection (beam_candidates.cpp) against decoding/search.py's torch operations.

One pass over each sentence's beam must give what ``_constrain`` followed by
``_best_candidates`` give as torch operations (fairseq's rules and fairseq's top-k):
the same values to the bit, the same beams and tokens, in the same order. Where a
sentence has fewer possible words than candidates (tiny vocabularies here), the rest
are -inf, and torch.topk orders equal values as its partial sort leaves them: there
only the values are compared. Such candidates never finish (fairseq drops -inf </s>)
and a -inf hypothesis never outscores a finite one, so which word it holds changes no output.
"""

import math

import pytest
import torch

from fconv_plugin import backend
from fconv_plugin.decoding import search as beam_search
from fconv_plugin.decoding.rules import SearchRules
from fconv_plugin.decoding.search import BeamSearch, _Beams
from tests.support import needs_compiled

PAD, EOS, UNK = 1, 2, 3
COMPILED = backend.loop("beam_candidates")  # None where it does not run (every test is then skipped)


pytestmark = needs_compiled("beam_candidates")  # the compiled pass against the torch operations


class _Search(BeamSearch):
    """Only the settings the candidate selection reads; no model."""

    def __init__(self, vocab_size, beam, unk_penalty, min_len):
        self.pad, self.unk, self.eos, self.vocab_size = PAD, UNK, EOS, vocab_size
        self.beam, self.unk_penalty, self.min_len = beam, unk_penalty, min_len
        self.rules = SearchRules(EOS, PAD, UNK, beam, min_len=min_len, unk_penalty=unk_penalty)


def _with_torch_operations(search, lprobs, beams, step, max_len):
    lprobs = lprobs.clone()
    search._constrain(lprobs, step, max_len, beams, None)
    return search._best_candidates(step, lprobs, beams.scores[:, step - 1] if step > 0 else None)


def _compiled(search, lprobs, beams, step):
    return COMPILED.best_candidates(
        lprobs, beams.scores[:, step - 1] if step > 0 else None, search.beam, search._candidate_count(step),
        PAD, UNK, search.unk_penalty, EOS, step < search.min_len)


def _case(seed, sentences, beam, vocab, step):
    generator = torch.Generator().manual_seed(seed)
    lprobs = torch.log_softmax(torch.randn(sentences * beam, vocab, generator=generator) * 4, dim=-1)
    lprobs[lprobs < -12] = -math.inf  # words the model rules out
    beams = _Beams(sentences, beam, max_len=20, eos=EOS, pad=PAD, device="cpu")
    beams.scores[:, :step] = -torch.rand(sentences * beam, step, generator=generator).cumsum(dim=1) * 3
    return lprobs, beams


@pytest.mark.parametrize("sentences,beam,vocab", [(16, 5, 4576), (3, 5, 30), (4, 1, 50), (2, 6, 9), (1, 2, 4)])
@pytest.mark.parametrize("step", [0, 1, 7])
@pytest.mark.parametrize("unk_penalty,min_len", [(0.0, 1), (1.5, 10), (-3.0, 3)])
def test_one_pass_gives_the_candidates_of_the_torch_operations(sentences, beam, vocab, step, unk_penalty, min_len):
    search = _Search(vocab, beam, unk_penalty, min_len)
    lprobs, beams = _case(seed=sentences * vocab + step, sentences=sentences, beam=beam, vocab=vocab, step=step)
    expected_scores, expected_tokens, expected_beams = _with_torch_operations(search, lprobs, beams, step, max_len=20)
    scores, beams_chosen, tokens = _compiled(search, lprobs, beams, step)
    _assert_same_candidates((scores, tokens, beams_chosen), (expected_scores, expected_tokens, expected_beams))
    if step < min_len:
        assert not tokens.eq(EOS).any() or bool(scores[tokens.eq(EOS)].isinf().all())


def _assert_same_candidates(actual, expected):
    """Equal values everywhere; equal words and beams wherever the value is finite."""
    scores, tokens, beams_chosen = actual
    assert torch.equal(scores, expected[0])
    possible = scores.isfinite()
    assert possible.sum() > 0
    assert torch.equal(tokens[possible], expected[1][possible])
    assert torch.equal(beams_chosen[possible], expected[2][possible])


def test_rows_with_nan_are_ruled_out_as_fairseq_rules_them_out():
    search = _Search(vocab_size=40, beam=4, unk_penalty=0.5, min_len=1)
    lprobs, beams = _case(seed=3, sentences=5, beam=4, vocab=40, step=2)
    lprobs[1] = math.nan  # a hypothesis whose distribution broke
    lprobs[6, 10:20] = math.nan
    lprobs[8:12] = math.nan  # a whole sentence: its candidates are -inf
    expected = _with_torch_operations(search, lprobs, beams, step=2, max_len=20)
    scores, beams_chosen, tokens = _compiled(search, lprobs, beams, step=2)
    _assert_same_candidates((scores, tokens, beams_chosen), expected)
    assert not scores.isnan().any()
    assert bool(scores[2].isinf().all())


def test_a_small_case_by_hand():
    """One sentence, beam 2, six words; scores -1 and -2; unk penalty 1; </s> allowed.
    Binary fractions, so every sum is exact."""
    lprobs = torch.tensor([[-0.5, -0.25, -2.0, -0.25, -3.0, -0.75],
                           [-0.25, -0.5, -0.125, -5.0, -0.25, -9.0]])
    scores = torch.tensor([-1.0, -2.0])
    values, beams_chosen, tokens = COMPILED.best_candidates(
        lprobs, scores, 2, 4, PAD, UNK, 1.0, EOS, False)
    # row 0: word 0 -1.5, pad ruled out, </s> -3.0, unk -0.25-1-1 = -2.25, word 4 -4.0, word 5 -1.75
    # row 1: word 0 -2.25, pad ruled out, </s> -2.125, unk -8.0, word 4 -2.25, word 5 -11.0
    assert values.tolist() == [[-1.5, -1.75, -2.125, -2.25]]
    # three candidates at -2.25: the lowest index (row 0's unk) is the one kept
    assert tokens.tolist() == [[0, 5, 2, 3]] and beams_chosen.tolist() == [[0, 0, 1, 0]]
    values, beams_chosen, tokens = COMPILED.best_candidates(
        lprobs, scores, 2, 4, PAD, UNK, 1.0, EOS, True)  # before min_len: no </s>
    assert values.tolist() == [[-1.5, -1.75, -2.25, -2.25]]
    assert tokens.tolist() == [[0, 5, 3, 0]] and beams_chosen.tolist() == [[0, 0, 0, 1]]


@pytest.mark.parametrize("vocab", [8, 64], ids=["one partial block", "blocks of 16 compared eight lanes at a time"])
def test_equal_candidates_go_lowest_index_first(vocab):
    lprobs = torch.full((2, vocab), -1.0)
    values, beams_chosen, tokens = COMPILED.best_candidates(
        lprobs, torch.zeros(2), 2, 4, PAD, UNK, 0.0, EOS, False)
    assert values.tolist() == [[-1.0] * 4]
    assert beams_chosen.tolist() == [[0, 0, 0, 0]] and tokens.tolist() == [[0, 2, 3, 4]]


# --- the candidates' split into finished hypotheses and the beam's continuation ---

class _SplitSearch(BeamSearch):
    def __init__(self, beam):
        self.eos, self.beam = EOS, beam


def _split_case(seed, sentences, beam, k):
    """Candidates best first with </s> often among them (finite or -inf) and fillers from
    the last step; some sentences where every candidate ends in </s>."""
    generator = torch.Generator().manual_seed(seed)
    scores = -torch.rand(sentences, k, generator=generator).mul(10).sort(dim=1).values
    scores[torch.rand(sentences, k, generator=generator) < 0.1] = -math.inf
    tokens = torch.randint(EOS, EOS + 3, (sentences, k), generator=generator)  # </s> about a third of the time
    tokens[0] = EOS
    beams = torch.randint(0, beam, (sentences, k), generator=generator)
    fillers = torch.rand(sentences, beam, generator=generator) < 0.3
    return scores, beams, tokens, fillers


@pytest.mark.parametrize("sentences,beam,k", [(16, 5, 10), (7, 1, 2), (5, 3, 4), (9, 4, 8), (1, 2, 2)])
@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_split_gives_fairseqs_split_of_the_candidates(sentences, beam, k, seed):
    """Against the torch operations of fairseq's generator (eos_mask, active_mask, top-k):
    the same finished candidates, and the same rows, tokens, scores and fillers to continue."""
    search = _SplitSearch(beam)
    case = _split_case(seed * 100 + sentences, sentences, beam, k)
    compiled = COMPILED.split_candidates(*case, EOS, beam)
    reference = search.split_candidates_in_torch_operations(*case)
    for name, got, expected in zip(("ending", "rows", "tokens", "scores", "fillers"), compiled, reference):
        assert torch.equal(got, expected), name


def test_a_split_by_hand():
    """Beam 2, four candidates. Sentence 0: the best ends in </s> and finishes; the beam goes
    on with the next two. Sentence 1: the first was a filler (its </s> does not finish again),
    every candidate ends in </s>, so the two first come back as fillers."""
    scores = torch.tensor([[-1.0, -2.0, -3.0, -4.0], [-1.5, -2.5, -3.5, -4.5]])
    tokens = torch.tensor([[EOS, 7, 8, EOS], [EOS, EOS, EOS, EOS]])
    beams = torch.tensor([[1, 0, 1, 0], [0, 1, 1, 0]])
    fillers = torch.tensor([[False, False], [True, False]])
    ending, rows, next_tokens, next_scores, next_fillers = COMPILED.split_candidates(
        scores, beams, tokens, fillers, EOS, 2)
    assert ending.tolist() == [[True, False], [False, True]]
    assert rows.tolist() == [[0, 1], [2, 3]]  # sentence · beam + beam index
    assert next_tokens.tolist() == [[7, 8], [EOS, EOS]]
    assert next_scores.tolist() == [[-2.0, -3.0], [-1.5, -2.5]]
    assert next_fillers.tolist() == [[False, False], [True, True]]


# --- the bookkeeping between steps ---

class _BookSearch(BeamSearch):
    """The settings the torch bookkeeping reads (given no compiled passes, it splits in fairseq's torch operations)."""

    def __init__(self, beam, normalize_scores, len_penalty):
        self.eos, self.pad, self.beam = EOS, PAD, beam
        self.normalize_scores, self.len_penalty = normalize_scores, len_penalty
        self.rules = SearchRules(EOS, PAD, UNK, beam, normalize_scores=normalize_scores, len_penalty=len_penalty)


def _step_candidates(generator, live, beam, step):
    """A step's candidates, best first: 2 x beam per live sentence, </s> often among them
    (sometimes -inf), beams anywhere in the sentence's beam (only the first at step 0)."""
    k = 2 * beam
    scores = -(torch.rand(live, k, generator=generator) * 4 + step).sort(dim=1).values
    scores[torch.rand(live, k, generator=generator) < 0.05] = -math.inf
    scores = scores.sort(dim=1, descending=True).values
    tokens = torch.randint(EOS + 1, 40, (live, k), generator=generator)
    tokens[torch.rand(live, k, generator=generator) < 0.3] = EOS
    beams = torch.zeros(live, k, dtype=torch.long) if step == 0 else torch.randint(0, beam, (live, k), generator=generator)
    return scores, beams, tokens


@pytest.mark.parametrize("sentences,beam,max_len,normalize_scores,len_penalty", [
    (16, 5, 30, True, 1.0), (7, 1, 12, True, 0.6), (5, 3, 6, False, 1.0), (9, 4, 20, True, 1.4), (1, 2, 3, True, 1.0)])
@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_bookkeeping_keeps_the_torch_bookkeepings_books(sentences, beam, max_len, normalize_scores,
                                                                      len_penalty, seed):
    """The same candidates fed to both, step after step: the same reorderings, sentences kept,
    live tokens and scores, and finished hypotheses, to the bit."""
    search = _BookSearch(beam, normalize_scores, len_penalty)
    compiled = COMPILED.Bookkeeping(sentences, beam, max_len, EOS, PAD, normalize_scores,
                                                           len_penalty)
    reference = beam_search._Bookkeeping(search, sentences, max_len, 0, torch.device("cpu"))
    generator = torch.Generator().manual_seed(seed)
    left_at = []
    for step in range(max_len + 1):
        assert torch.equal(compiled.tokens(step), reference.tokens(step))
        if step > 0:
            assert torch.equal(compiled.scores(step - 1), reference.scores(step - 1))
        candidates = _step_candidates(generator, reference.tokens(step).size(0) // beam, beam, step)
        finished, reorder, kept = compiled.advance(step, *candidates)
        expected_finished, expected_reorder, expected_kept = reference.advance(step, *candidates)
        assert finished == expected_finished
        if finished:
            break
        assert torch.equal(reorder, expected_reorder)
        assert (kept is None) == (expected_kept is None)
        if kept is not None:
            assert torch.equal(kept, expected_kept)
            left_at.append(step)
    assert finished or step == max_len
    for name, got, expected in zip(("count", "tokens", "positional scores", "lengths", "scores"),
                                   compiled.finished(), reference.finished()):
        assert torch.equal(got, expected), name
    assert int(reference.hypotheses.count.sum()) > 0
    if sentences > 1 and max_len > 10:
        assert left_at  # sentences really left the batch


def test_finished_hypotheses_by_hand():
    """One sentence, beam 2, length penalty 1. Step 0 goes on with words 5 and 6 (-1, -2);
    step 1: the best ends in </s> at -1.5 from beam 1's row, so it finishes with tokens
    6 </s>, positional scores -2, 0.5 and score -1.5 / 2."""
    book = COMPILED.Bookkeeping(1, 2, 5, EOS, PAD, True, 1.0)
    finished, reorder, kept = book.advance(0, torch.tensor([[-1.0, -2.0, -3.0, -4.0]]),
                                           torch.zeros(1, 4, dtype=torch.long), torch.tensor([[5, 6, 7, 8]]))
    assert not finished and reorder.tolist() == [0, 0] and kept is None
    assert book.tokens(1).tolist() == [[EOS, 5], [EOS, 6]] and book.scores(0).tolist() == [-1.0, -2.0]
    finished, reorder, kept = book.advance(1, torch.tensor([[-1.5, -2.5, -3.0, -3.5]]),
                                           torch.tensor([[1, 0, 0, 1]]), torch.tensor([[EOS, 9, 10, 11]]))
    assert not finished and reorder.tolist() == [0, 0] and kept is None
    assert book.tokens(2).tolist() == [[EOS, 5, 9], [EOS, 5, 10]]
    count, tokens, positional, lengths, scores = book.finished()
    assert count.tolist() == [1] and lengths[0, 0] == 2 and scores[0, 0] == -0.75
    assert tokens[0, 0, :2].tolist() == [6, EOS] and positional[0, 0, :2].tolist() == [-2.0, 0.5]


@needs_compiled("beam_candidates")
@needs_compiled("decoder_step")
@needs_compiled("int8_rows")
def test_whole_steps_drive_only_the_compiled_decoding_through_its_table():
    """``Bookkeeping.run_steps`` calls the compiled decoding C++ to C++ (the table
    ``decoder_step`` hands out), never a Python object's methods: anything else is refused
    with a one-line error before a step is run."""
    book = COMPILED.Bookkeeping(1, 2, 5, 2, 1, True, 1.0)

    class LooksLikeADecoding:
        def reorder(self, order):
            raise AssertionError("called back into Python")

        def log_probs(self, last, position, attention):
            raise AssertionError("called back into Python")

    with pytest.raises(RuntimeError, match="drives the compiled decoding"):
        book.run_steps(LooksLikeADecoding(), backend.loop("decoder_step").api, 0, 10, 1, 1, 3, 0.0, 0)
    with pytest.raises(RuntimeError, match="not the compiled decoding's table"):
        book.run_steps(LooksLikeADecoding(), backend.loop("int8_rows").api, 0, 10, 1, 1, 3, 0.0, 0)
