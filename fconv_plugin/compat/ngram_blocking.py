"""``--no-repeat-ngram-size`` on CPUs (fairseq issues #4709, #5206).

fairseq's SequenceGenerator hands the n-gram blocker its whole token buffer, padded
to the maximum length, and the CPU path compares the last n-1 entries of that buffer
(padding) with earlier n-grams, so it never blocks anything: the option is a no-op
without a GPU. Here the blocker gets the tokens generated so far, the ones its
``step`` argument describes, which is what its CUDA kernel reads.
"""

from fairseq.ngram_repeat_block import NGramRepeatBlock

from ._patching import patch


def _generated_tokens_only(forward):
    def block_repeated_ngrams(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
        if not tokens.is_cuda:
            tokens = tokens[:, : step + 1]
        return forward(self, tokens, lprobs, bsz, beam_size, step)

    return block_repeated_ngrams


def install() -> None:
    patch(NGramRepeatBlock, "forward", "ngram_blocking", _generated_tokens_only)
