"""Dropout (§3.5): on the embeddings, the input of every convolution and the decoder's
output, each element kept with probability 1 − p and scaled by 1 / (1 − p).

torch's ``F.dropout`` draws one Bernoulli number an element; fairseq's fconv draws the same
masks for a seed, so float32 training matches it number for number. ``dropout_from_16_bit_draws``
draws the same distribution with a quarter of the generator's calls: four decisions from each
64-bit random number of torch's generator, an element kept where its 16 bits, read as a
signed integer s, have s + 32768 ≥ p · 65536 (p rounded to a multiple of 1/65536; the
scaling is 1 / (1 − that p)); a p that 65,536 levels give to worse than 1% (small ones only:
0.0001 comes out 6.8% off), and p = 1, keep torch's draws. Which one a training step uses is ``backend.training_dropout``'s choice.
"""

import torch
import torch.nn.functional as F
from torch import Tensor

_LEVELS = 1 << 16


def sixteen_bit_drop_level(p: float) -> int:
    """p as a count of the 65,536 levels of a 16-bit draw: a draw below it drops its element."""
    return round(p * _LEVELS)


def sixteen_bits_hold(p: float) -> bool:
    """Whether 16-bit draws give p within 1% (and keep something: p below 1)."""
    level = sixteen_bit_drop_level(p)
    return 0 < p < 1 and 0 < level < _LEVELS and abs(level / _LEVELS - p) <= 0.01 * p


def dropout_from_16_bit_draws(x: Tensor, p: float) -> Tensor:
    """``x`` with each element dropped where its 16-bit draw is below ``sixteen_bit_drop_level(p)``, the rest
    scaled to keep the expectation; autograd's backward multiplies by the same mask. A p the levels do not
    hold (``sixteen_bits_hold``) draws torch's masks instead; p outside [0, 1] is refused as torch refuses it."""
    if not sixteen_bits_hold(p):
        return F.dropout(x, p=p, training=True)
    level = sixteen_bit_drop_level(p)
    count = x.numel()
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device=x.device).random_(-(1 << 63), None)  # any 64 bits
    draws = words.view(torch.int16)[:count].view(x.shape)  # s + 32768 is uniform over 0 .. 65535
    kept = draws >= level - _LEVELS // 2
    return x * kept.to(x.dtype).mul_(_LEVELS / (_LEVELS - level))
