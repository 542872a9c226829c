"""modules/dropout.py: dropout's masks from 16-bit draws, against a re-computation of the same
draws with Python's integers, the drop rate over many elements, and the backward's mask."""

import math
import sys

import pytest
import torch
import torch.nn.functional as F

from fconv_plugin.modules.dropout import dropout_from_16_bit_draws, sixteen_bit_drop_level


def _kept_by_hand(seed: int, count: int, level: int) -> list:
    """Re-drawn from the same seed: each 64-bit number's four 16-bit pieces in memory order (lowest first
    on a little-endian CPU), read as signed integers s; an element is kept where s + 32768 reaches ``level``."""
    torch.manual_seed(seed)
    words = torch.empty((count + 3) // 4, dtype=torch.int64).random_(-(1 << 63), None).tolist()
    order = range(4) if sys.byteorder == "little" else range(3, -1, -1)
    pieces = [(word % (1 << 64)) >> (16 * i) & 0xFFFF for word in words for i in order]
    signed = [piece - 65536 if piece >= 32768 else piece for piece in pieces[:count]]
    return [s + 32768 >= level for s in signed]


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_each_element_is_kept_where_its_16_bit_draw_reaches_the_drop_level_and_scaled_to_keep_the_expectation(p):
    x = torch.randn(3, 7, dtype=torch.float64)  # 21 elements: not a multiple of 4
    torch.manual_seed(11)
    dropped = dropout_from_16_bit_draws(x, p)
    level = sixteen_bit_drop_level(p)
    kept = _kept_by_hand(11, x.numel(), level)
    scale = 65536 / (65536 - level)
    expected = [value * scale if keep else 0.0 for value, keep in zip(x.view(-1).tolist(), kept)]
    assert dropped.view(-1).tolist() == expected
    assert level == round(p * 65536) and abs(level / 65536 - p) <= 0.5 / 65536


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5])
def test_the_drop_rate_is_p_and_the_mean_is_kept(p):
    count = 1 << 21
    torch.manual_seed(3)
    dropped = dropout_from_16_bit_draws(torch.ones(count, dtype=torch.float64), p)
    rate = dropped.eq(0).double().mean().item()
    sigma = math.sqrt(p * (1 - p) / count)
    assert abs(rate - p) < 5 * sigma
    assert abs(dropped.mean().item() - 1.0) < 5 * sigma / (1 - p)
    assert set(dropped.unique().tolist()) == {0.0, 65536 / (65536 - sixteen_bit_drop_level(p))}


def test_bfloat16s_backward_multiplies_by_the_forwards_mask():
    x = torch.randn(30, 4, 64).bfloat16().requires_grad_()
    gradient = torch.randn(30, 4, 64).bfloat16()
    torch.manual_seed(5)
    dropped = dropout_from_16_bit_draws(x, 0.1)
    dropped.backward(gradient)
    scale = torch.tensor(65536 / (65536 - sixteen_bit_drop_level(0.1))).bfloat16().double()
    kept = dropped.ne(0) | x.eq(0)
    assert torch.equal(dropped.double(), torch.where(kept, (x.double() * scale).bfloat16().double(), 0.0))
    assert torch.equal(x.grad.double(), torch.where(kept, (gradient.double() * scale).bfloat16().double(), 0.0))
    assert dropped.dtype == torch.bfloat16


@pytest.mark.parametrize("p", [1e-5, 1e-4, 0.9999999, 1.0])
def test_a_p_that_16_bits_do_not_hold_within_1_percent_draws_torchs_masks(p):
    x = torch.randn(1000, 64)
    torch.manual_seed(2)
    ours = dropout_from_16_bit_draws(x, p)
    torch.manual_seed(2)
    assert torch.equal(ours, F.dropout(x, p=p, training=True))


def test_a_p_outside_0_to_1_is_refused_as_torch_refuses_it():
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            dropout_from_16_bit_draws(torch.ones(8), p)
