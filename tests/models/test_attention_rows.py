"""The attention source laid out for beam search's rows (``models/attention_rows.py``): one
copy per sentence gives each hypothesis what its own copy gives, through every reordering."""

import torch

from fconv_plugin.models import attention_rows
from fconv_plugin.modules.attention import AttentionLayer, AttentionSource


def _beam_batch(beam=3, sentences=2, tgt_len=1, src_len=5):
    """A source per sentence repeated once per hypothesis, as beam search lays it out."""
    torch.manual_seed(1)
    z = torch.randn(sentences, src_len, 4, dtype=torch.float64).repeat_interleave(beam, dim=0)
    values = torch.randn(sentences, src_len, 4, dtype=torch.float64).repeat_interleave(beam, dim=0)
    padding = torch.tensor([[True, True, False, False, False], [False] * 5]).repeat_interleave(beam, dim=0)
    h = torch.randn(sentences * beam, tgt_len, 6, dtype=torch.float64)
    g = torch.randn(sentences * beam, tgt_len, 4, dtype=torch.float64)
    return h, g, AttentionSource.from_encoder((z, values), padding)


def test_a_source_shared_across_the_beam_gives_each_hypothesis_its_own_result():
    torch.manual_seed(0)
    layer = AttentionLayer(conv_channels=6, embed_dim=4).double()
    for tgt_len in (1, 3):
        h, g, per_hypothesis = _beam_batch(tgt_len=tgt_len)
        shared = attention_rows.shared_across(per_hypothesis, 3)
        assert shared.copies == 3 and shared.keys.size(0) == 2  # one copy per sentence
        expected_out, expected_weights = layer(h, g, per_hypothesis)  # checked against the formulas above
        out, weights = layer(h, g, shared)
        assert torch.allclose(out, expected_out, rtol=1e-12, atol=1e-12)
        assert torch.allclose(weights, expected_weights, rtol=1e-12, atol=1e-12)


def test_rows_that_are_not_copies_are_not_shared():
    h, g, source = _beam_batch()
    # 6 rows in pairs: rows 2 and 3 belong to different sentences
    assert attention_rows.shared_across(source, 2).copies == 1
    assert attention_rows.shared_across(source, 4).copies == 1  # 6 rows do not split into runs of 4
    mask = source.padding_mask.clone()
    mask[1, 2] = True  # the second copy of the first sentence hides one more word
    masked = AttentionSource(source.keys, source.values, mask, source.length_scale)
    assert attention_rows.shared_across(masked, 3).copies == 1
    values = source.values.clone()
    values[4, 0, 0] += 1.0  # the second copy of the second sentence reads other values
    other_values = AttentionSource(source.keys, values, source.padding_mask, source.length_scale)
    assert attention_rows.shared_across(other_values, 3).copies == 1


def test_reordering_a_shared_source_equals_reordering_every_copy():
    torch.manual_seed(0)
    layer = AttentionLayer(conv_channels=6, embed_dim=4).double()
    h, g, per_hypothesis = _beam_batch()
    shared = attention_rows.shared_across(per_hypothesis, 3)
    orders = {
        "beams swap within each sentence": ([2, 0, 0, 5, 3, 4], 3, 2),
        "the first sentence finished": ([4, 3, 3], 3, 1),
        "rows move between sentences": ([0, 3, 1, 4, 2, 5], 1, 6),
        "not whole sentences": ([0, 1, 2, 3], 1, 4),
    }
    for name, (order, copies, rows) in orders.items():
        order = torch.tensor(order)
        reordered = attention_rows.reordered(shared, order)
        assert (reordered.copies, reordered.keys.size(0)) == (copies, rows), name
        out, weights = layer(h[order], g[order], reordered)
        expected_out, expected_weights = layer(h[order], g[order], attention_rows.reordered(per_hypothesis, order))
        assert torch.allclose(out, expected_out, rtol=1e-12, atol=1e-12), name
        assert torch.allclose(weights, expected_weights, rtol=1e-12, atol=1e-12), name
    assert attention_rows.reordered(shared, torch.tensor([1, 1, 0, 5, 5, 3])) is shared  # nothing moves


def test_rows_read_in_runs_of_the_beam_share_one_copy_per_sentence():
    """What the decoder builds from a recorded reordering (the encoder's rows index)."""
    torch.manual_seed(0)
    layer = AttentionLayer(conv_channels=6, embed_dim=4).double()
    h, g, per_hypothesis = _beam_batch()
    # one row per sentence, as the encoder gives
    per_sentence = attention_rows.reordered(per_hypothesis, torch.tensor([0, 3]))
    cases = {
        "each sentence expanded to its beam": ([0, 0, 0, 1, 1, 1], 3, 2),
        "the first sentence finished": ([1, 1, 1], 3, 1),
        "hypotheses of two sentences in one run": ([0, 0, 1, 1, 1, 0], 1, 6),
    }
    for name, (rows, copies, kept) in cases.items():
        rows = torch.tensor(rows)
        source = attention_rows.for_rows(per_sentence, rows, 3)
        assert (source.copies, source.keys.size(0)) == (copies, kept), name
        decoder_rows = torch.arange(rows.numel())
        out, weights = layer(h[decoder_rows], g[decoder_rows], source)
        every_copy = attention_rows.reordered(per_hypothesis, rows * 3)
        expected_out, expected_weights = layer(h[decoder_rows], g[decoder_rows], every_copy)
        assert torch.allclose(out, expected_out, rtol=1e-12, atol=1e-12), name
        assert torch.allclose(weights, expected_weights, rtol=1e-12, atol=1e-12), name
