"""--no-repeat-ngram-size blocks repeated n-grams on a CPU."""

import math

import torch
from fairseq.ngram_repeat_block import NGramRepeatBlock

# the fix is installed for the whole test session (tests/conftest.py)


def test_the_token_that_would_repeat_a_bigram_is_banned_hand_checked():
    # generated so far (step 3): 5 7 5 ... then padding (1) up to the buffer's length
    tokens = torch.tensor([[5, 7, 5, 1, 1, 1, 1, 1], [5, 7, 8, 1, 1, 1, 1, 1]])
    lprobs = torch.zeros(2, 10)
    blocked = NGramRepeatBlock(2)(tokens, lprobs.clone(), bsz=1, beam_size=2, step=2)
    # row 0 ends in 5 and "5 7" was seen: 7 is banned; row 1 ends in 8, never seen before
    assert blocked[0, 7] == -math.inf
    assert torch.isfinite(blocked[0, [i for i in range(10) if i != 7]]).all()
    assert torch.isfinite(blocked[1]).all()


def test_trigram_blocking_sees_only_generated_tokens():
    # 4 6 4 6 generated (step 3), then padding: "4 6 4" seen, ends in "4 6" -> 4 banned
    tokens = torch.tensor([[4, 6, 4, 6] + [1] * 6])
    blocked = NGramRepeatBlock(3)(tokens, torch.zeros(1, 8), bsz=1, beam_size=1, step=3)
    assert blocked[0, 4] == -math.inf
    assert int(torch.isinf(blocked).sum()) == 1
