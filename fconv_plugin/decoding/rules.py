"""Beam search's rules, stated once: what every form of the search must do (§4.3; fairseq
0.12's ``SequenceGenerator`` with ``search.BeamSearch``).

The torch form (``decoding/search.py``), the compiled form (``native/beam_candidates.cpp``)
and the numpy form of the ONNX runtime (``fconv_onnx/beam_search.py``, which imports no
plugin code) each implement these rules in their own vectorised way;
``tests/decoding/test_rules.py`` checks each against this statement on the same cases, and
the statement itself against hand-checked edge cases. Written for reading: plain Python,
one hypothesis at a time; the torch form takes its lengths, candidate counts and scores'
divisor from here.
"""

import math
import struct
from dataclasses import dataclass
from typing import List, Optional, Sequence, Set

NEG_INF = float("-inf")


@dataclass(frozen=True)
class SearchRules:
    """The settings, named as fairseq names them (``--beam``, ``--max-len-a`` ...)."""

    eos: int
    pad: int
    unk: int
    beam: int = 5
    max_len_a: float = 0.0
    max_len_b: int = 200
    max_positions: int = 1024  # the decoder's positions: an output has at most max_positions - 1 tokens
    min_len: int = 1
    normalize_scores: bool = True
    len_penalty: float = 1.0
    unk_penalty: float = 0.0
    no_repeat_ngram_size: int = 0

    def max_length(self, src_len: int) -> int:
        """Output tokens allowed, </s> not counted: a·src_len + b, at most the decoder's positions less one."""
        return min(int(self.max_len_a * src_len + self.max_len_b), self.max_positions - 1)

    def candidate_count(self, step: int, vocab_size: int) -> int:
        """Candidates taken per sentence at ``step``: twice the beam (half may end in </s>),
        fewer if a sentence has fewer extensions (at step 0 only the first hypothesis extends,
        and <pad> never does)."""
        return min(2 * self.beam, (1 if step == 0 else self.beam) * vocab_size - 1)

    def length_divisor(self, step: int) -> Optional[float]:
        """A hypothesis finished at ``step`` has step + 1 tokens with </s>; its score is its
        sum divided by this (length^lenpen), or the sum itself where scores are not normalised."""
        return (step + 1) ** self.len_penalty if self.normalize_scores else None

    def blocked(self, produced: Sequence[int]) -> Set[int]:
        """Tokens that would repeat an n-gram of the hypothesis (its tokens so far, without the
        opening </s>): each token that followed an earlier occurrence of its last n - 1 tokens."""
        n = self.no_repeat_ngram_size
        if n <= 0:
            return set()
        if n == 1:
            return set(produced)
        tokens = [self.eos, *produced]  # fairseq's rows start with </s>, which takes part in the windows
        tail = tokens[len(tokens) - (n - 1):]
        return {tokens[start + n - 1] for start in range(len(tokens) - (n - 1)) if tokens[start: start + n - 1] == tail}

    def next_token_scores(self, log_probs: Sequence[float], step: int, max_len: int, produced: Sequence[int] = (),
                          forced: Optional[int] = None) -> List[float]:
        """One hypothesis' log-probabilities for its next token under the rules, in fairseq's order:
        NaN is -inf; <pad> never; <unk> less ``unk_penalty``; at ``max_len`` only </s>; a forced
        prefix token (``forced``, before ``max_len``) alone, at its own log-probability, else no
        </s> before ``min_len``; then no token that repeats an n-gram."""
        scores = [NEG_INF if math.isnan(value) else float(value) for value in log_probs]
        scores[self.pad] = NEG_INF
        scores[self.unk] = _float32(scores[self.unk] - _float32(self.unk_penalty))
        if step >= max_len:
            scores = [value if token == self.eos else NEG_INF for token, value in enumerate(scores)]
        if forced is not None and step < max_len:
            scores = [value if token == forced else NEG_INF for token, value in enumerate(scores)]
        elif step < self.min_len:
            scores[self.eos] = NEG_INF
        for token in self.blocked(produced):
            scores[token] = NEG_INF
        return scores


def _float32(value: float) -> float:
    """``value`` rounded to float32, as the forms' float32 arithmetic rounds it."""
    return struct.unpack("f", struct.pack("f", value))[0]
