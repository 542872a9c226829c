"""Beam search as fairseq's SequenceGenerator (fairseq 0.12, ``search.BeamSearch``), in numpy.

Per step and sentence: the 2 · beam best continuations of all hypotheses (cumulative
log-probabilities, float32); those among the first ``beam`` that end in </s> are
finished with the score normalised by length (score / len^lenpen, the length counting
</s>); the first ``beam`` that do not end in </s> go on. A sentence is done when it has
``beam`` finished hypotheses, or at the maximum length, where only </s> may follow. At
the first step only the first hypothesis of each sentence is expanded. <pad> is never
chosen, <unk> pays ``unk_penalty``, and </s> is barred before ``min_len`` tokens.

The step graph chooses the candidates itself (onnxruntime's TopK over every sentence's
beam x vocabulary scores, ``select_candidates`` in ``fconv_plugin/export/graphs.py``):
this search passes the step's rules as one row of penalties and the beams' scores, and
only a step whose log-probabilities hold a NaN (fairseq makes it -inf first) chooses
them here, from the full rows.
"""

from dataclasses import dataclass
from typing import List

import numpy as np


@dataclass
class Hypothesis:
    tokens: np.ndarray  # ends with </s>
    score: float  # length-normalised log-probability (natural log)
    positional_scores: np.ndarray


def _top_k(values: np.ndarray, k: int):
    """The k largest of each row, best first (ties: the lower index first)."""
    part = np.argpartition(-values, k - 1, axis=1)[:, :k]
    part_values = np.take_along_axis(values, part, axis=1)
    order = np.lexsort((part, -part_values), axis=1)
    indices = np.take_along_axis(part, order, axis=1)
    return np.take_along_axis(values, indices, axis=1), indices


def generate(model, src_tokens: np.ndarray, beam: int, eos: int, pad: int, unk: int, max_len_a: float = 0.0,
             max_len_b: int = 200, min_len: int = 1, len_penalty: float = 1.0, unk_penalty: float = 0.0,
             max_positions: float = float("inf")) -> List[List[Hypothesis]]:
    """Finished hypotheses of each sentence of ``src_tokens`` (sentences x src_len), best first.

    ``model`` has ``vocabulary_size``, ``start(src_tokens, copies)``, ``step(prev_tokens,
    token_penalty, beam_scores)`` → every sentence's 2 · beam best candidates (scores and
    flat indices, best first) and each row's sum of log-probabilities, ``last_log_probs()``
    (rows x vocabulary) and ``reorder(order, sentences_left)``.
    """
    bsz, src_len = src_tokens.shape
    max_len = int(min(int(max_len_a * src_len + max_len_b), max_positions - 1))
    if min_len > max_len:
        raise ValueError(f"min_len {min_len} is larger than the maximum length {max_len}")
    vocab = model.vocabulary_size
    model.start(src_tokens, beam)

    scores = np.zeros((bsz * beam, max_len + 1), np.float32)
    tokens = np.full((bsz * beam, max_len + 2), pad, np.int64)
    tokens[:, 0] = eos
    cands_to_ignore = np.zeros((bsz, beam), bool)
    finalized: List[List[Hypothesis]] = [[] for _ in range(bsz)]
    finished = [False] * bsz
    remaining = bsz
    cand_size = 2 * beam
    bbsz_offsets = (np.arange(bsz) * beam)[:, None]
    cand_offsets = np.arange(cand_size)
    reorder_state = None
    batch_idxs = None
    first_beam_scores = np.full(beam, -np.inf, np.float32)
    first_beam_scores[0] = 0.0  # the first step extends each sentence's first hypothesis only

    for step in range(max_len + 1):
        if reorder_state is not None:
            if batch_idxs is not None:
                correction = batch_idxs - np.arange(batch_idxs.size)
                reorder_state = (reorder_state.reshape(-1, beam) + correction[:, None] * beam).reshape(-1)
            model.reorder(reorder_state, sentences_left=batch_idxs is not None)
        if step == 0 or step == min_len or step == max_len:  # the rules change only there
            token_penalty = _token_penalty(vocab, step, pad, unk, eos, unk_penalty, min_len, max_len)
        beam_scores = (np.tile(first_beam_scores, (bsz, 1)) if step == 0
                       else np.ascontiguousarray(scores.reshape(bsz, beam, -1)[:, :, step - 1]))
        cand_scores, cand_flat, row_sums = model.step(tokens[:, : step + 1], token_penalty, beam_scores)
        total = float(row_sums.sum())  # NaN or +inf where a row has NaN or +inf (-inf alone is no NaN)
        if total != total or total == np.inf:  # fairseq's rules on the full rows
            lprobs = model.last_log_probs().astype(np.float32, copy=True)
            cand_scores, cand_flat = _candidates_from_log_probs(lprobs, token_penalty, beam_scores,
                                                                min(cand_size, beam * vocab - 1))
        width = min(cand_size, (1 if step == 0 else beam) * vocab - 1)
        cand_scores, cand_flat = cand_scores[:, :width], cand_flat[:, :width]
        cand_beams, cand_indices = cand_flat // vocab, cand_flat % vocab
        cand_bbsz_idx = cand_beams + bbsz_offsets

        eos_mask = (cand_indices == eos) & (cand_scores != -np.inf)
        eos_mask[:, :beam][cands_to_ignore] = False
        first = eos_mask[:, :beam]
        eos_bbsz_idx = cand_bbsz_idx[:, :beam][first]
        finalized_sents: List[int] = []
        if eos_bbsz_idx.size > 0:
            eos_scores = cand_scores[:, :beam][first]
            finalized_sents = _finalize(step, eos_bbsz_idx, eos_scores, tokens, scores, finalized, finished, beam,
                                        max_len, eos, len_penalty)
            remaining -= len(finalized_sents)
        if remaining == 0:
            break
        assert step < max_len

        if finalized_sents:
            new_bsz = bsz - len(finalized_sents)
            keep = np.ones(bsz, bool)
            keep[finalized_sents] = False
            batch_idxs = np.arange(bsz)[keep]
            eos_mask, cand_beams = eos_mask[batch_idxs], cand_beams[batch_idxs]
            bbsz_offsets = bbsz_offsets[:new_bsz]
            cand_bbsz_idx = cand_beams + bbsz_offsets
            cand_scores, cand_indices = cand_scores[batch_idxs], cand_indices[batch_idxs]
            cands_to_ignore = cands_to_ignore[batch_idxs]
            scores = scores.reshape(bsz, -1)[batch_idxs].reshape(new_bsz * beam, -1)
            tokens = tokens.reshape(bsz, -1)[batch_idxs].reshape(new_bsz * beam, -1)
            bsz = new_bsz
        else:
            batch_idxs = None

        # the first `beam` candidates that do not end in </s> continue
        eos_mask[:, :beam] = ~(~cands_to_ignore & ~eos_mask[:, :beam])
        active_mask = eos_mask.astype(np.int64) * cand_size + cand_offsets[: eos_mask.shape[1]]
        active_hypos = np.argsort(active_mask, axis=1, kind="stable")[:, :beam]
        chosen = (np.arange(bsz)[:, None], active_hypos)  # each sentence's row, its chosen candidates
        cands_to_ignore = active_mask[chosen] >= cand_size
        active_bbsz_idx = cand_bbsz_idx[chosen].reshape(-1)
        tokens[:, : step + 1] = tokens[active_bbsz_idx, : step + 1]
        tokens.reshape(bsz, beam, -1)[:, :, step + 1] = cand_indices[chosen]
        if step > 0:
            scores[:, :step] = scores[active_bbsz_idx, :step]
        scores.reshape(bsz, beam, -1)[:, :, step] = cand_scores[chosen]
        reorder_state = active_bbsz_idx

    return [sorted(hypotheses, key=lambda h: -h.score) for hypotheses in finalized]


def _token_penalty(vocab: int, step: int, pad: int, unk: int, eos: int, unk_penalty: float, min_len: int,
                   max_len: int) -> np.ndarray:
    """The step's rules as one row added to every hypothesis' log-probabilities: <pad> never,
    <unk> less ``unk_penalty``, only </s> at the maximum length, no </s> before ``min_len``."""
    penalty = np.zeros(vocab, np.float32)
    if step >= max_len:
        penalty[:] = -np.inf
        penalty[eos] = 0.0
    penalty[unk] = np.float32(-unk_penalty) if step < max_len else -np.inf
    penalty[pad] = -np.inf
    if step < min_len:
        penalty[eos] = -np.inf
    return penalty


def _candidates_from_log_probs(lprobs: np.ndarray, token_penalty: np.ndarray, beam_scores: np.ndarray, k: int):
    """The candidates as fairseq chooses them from full rows that hold a NaN: NaN becomes
    -inf, the rules are set (<pad> and barred tokens to -inf, not added, as fairseq sets
    them), then the beams' scores are added and the k best taken."""
    lprobs[np.isnan(lprobs)] = -np.inf
    barred = np.isneginf(token_penalty)
    lprobs[:, barred] = -np.inf
    lprobs[:, ~barred] += token_penalty[~barred]
    sentences, beam = beam_scores.shape
    expanded = lprobs.reshape(sentences, beam, -1) + beam_scores[:, :, None]
    return _top_k(expanded.reshape(sentences, -1), k)


def _finalize(step, bbsz_idx, eos_scores, tokens, scores, finalized, finished, beam, max_len, eos, len_penalty):
    """Store the hypotheses that end in </s>; returns the batch rows of sentences now done."""
    tokens_clone = tokens[bbsz_idx, 1: step + 2].copy()
    tokens_clone[:, step] = eos
    pos_scores = scores[bbsz_idx, : step + 1].copy()
    pos_scores[:, step] = eos_scores
    pos_scores[:, 1:] = pos_scores[:, 1:] - pos_scores[:, :-1]
    eos_scores = eos_scores / np.float32((step + 1) ** len_penalty)

    unfinished = [sentence for sentence, done in enumerate(finished) if not done]  # batch row -> sentence
    unfin_idx = bbsz_idx // beam
    sentences = [unfinished[row] for row in unfin_idx]
    for i, sentence in enumerate(sentences):
        if len(finalized[sentence]) < beam:
            finalized[sentence].append(Hypothesis(tokens_clone[i], float(eos_scores[i]), pos_scores[i]))
    newly_finished = []
    for sentence, row in sorted(set(zip(sentences, unfin_idx.tolist()))):
        if not finished[sentence] and (len(finalized[sentence]) == beam or step == max_len):
            finished[sentence] = True
            newly_finished.append(row)
    return newly_finished
