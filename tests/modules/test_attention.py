import math

import torch

from fconv_plugin.modules.attention import AttentionLayer, AttentionSource


def test_attention_matches_the_paper_formulas_in_float64():
    torch.manual_seed(0)
    layer = AttentionLayer(conv_channels=6, embed_dim=4).double()
    batch, tgt_len, src_len = 2, 3, 5
    h = torch.randn(batch, tgt_len, 6, dtype=torch.float64)
    g = torch.randn(batch, tgt_len, 4, dtype=torch.float64)
    z = torch.randn(batch, src_len, 4, dtype=torch.float64)
    values = torch.randn(batch, src_len, 4, dtype=torch.float64)
    padding = torch.tensor([[True, True, False, False, False], [False] * 5])
    source = AttentionSource.from_encoder((z, values), padding)
    out, weights = layer(h, g, source)

    w_in, b_in = layer.in_projection.normalized_weight(), layer.in_projection.bias
    w_out, b_out = layer.out_projection.normalized_weight(), layer.out_projection.bias
    for b in range(batch):
        real = (~padding[b]).nonzero().view(-1)
        s = len(real)
        for i in range(tgt_len):
            d = (w_in @ h[b, i] + b_in + g[b, i]) * math.sqrt(0.5)
            scores = torch.stack([d @ z[b, j] for j in real])
            a = torch.exp(scores) / torch.exp(scores).sum()
            c = sum(a[n] * values[b, j] for n, j in enumerate(real)) * s * math.sqrt(1.0 / s)
            expected = (w_out @ c + b_out + h[b, i]) * math.sqrt(0.5)
            assert torch.allclose(out[b, i], expected, rtol=1e-10)
            assert torch.allclose(weights[b, i, real], a, rtol=1e-10)
            assert torch.count_nonzero(weights[b, i, padding[b]]) == 0


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
        shared = per_hypothesis.shared_across(3)
        assert shared.copies == 3 and shared.keys.size(0) == 2  # one copy per sentence
        expected_out, expected_weights = layer(h, g, per_hypothesis)  # checked against the formulas above
        out, weights = layer(h, g, shared)
        assert torch.allclose(out, expected_out, rtol=1e-12, atol=1e-12)
        assert torch.allclose(weights, expected_weights, rtol=1e-12, atol=1e-12)


def test_rows_that_are_not_copies_are_not_shared():
    h, g, source = _beam_batch()
    assert source.shared_across(2).copies == 1  # 6 rows in pairs: rows 2 and 3 belong to different sentences
    assert source.shared_across(4).copies == 1  # 6 rows do not split into runs of 4
    mask = source.padding_mask.clone()
    mask[1, 2] = True  # the second copy of the first sentence hides one more word
    assert AttentionSource(source.keys, source.values, mask, source.length_scale).shared_across(3).copies == 1
    values = source.values.clone()
    values[4, 0, 0] += 1.0  # the second copy of the second sentence reads other values
    assert AttentionSource(source.keys, values, source.padding_mask, source.length_scale).shared_across(3).copies == 1


def test_reordering_a_shared_source_equals_reordering_every_copy():
    torch.manual_seed(0)
    layer = AttentionLayer(conv_channels=6, embed_dim=4).double()
    h, g, per_hypothesis = _beam_batch()
    shared = per_hypothesis.shared_across(3)
    orders = {
        "beams swap within each sentence": ([2, 0, 0, 5, 3, 4], 3, 2),
        "the first sentence finished": ([4, 3, 3], 3, 1),
        "rows move between sentences": ([0, 3, 1, 4, 2, 5], 1, 6),
        "not whole sentences": ([0, 1, 2, 3], 1, 4),
    }
    for name, (order, copies, rows) in orders.items():
        order = torch.tensor(order)
        reordered = shared.index_select(order)
        assert (reordered.copies, reordered.keys.size(0)) == (copies, rows), name
        out, weights = layer(h[order], g[order], reordered)
        expected_out, expected_weights = layer(h[order], g[order], per_hypothesis.index_select(order))
        assert torch.allclose(out, expected_out, rtol=1e-12, atol=1e-12), name
        assert torch.allclose(weights, expected_weights, rtol=1e-12, atol=1e-12), name
    assert shared.index_select(torch.tensor([1, 1, 0, 5, 5, 3])) is shared  # nothing moves


def test_rows_read_in_runs_of_the_beam_share_one_copy_per_sentence():
    """What the decoder builds from a recorded reordering (the encoder's rows index)."""
    torch.manual_seed(0)
    layer = AttentionLayer(conv_channels=6, embed_dim=4).double()
    h, g, per_hypothesis = _beam_batch()
    per_sentence = per_hypothesis.index_select(torch.tensor([0, 3]))  # one row per sentence, as the encoder gives
    cases = {
        "each sentence expanded to its beam": ([0, 0, 0, 1, 1, 1], 3, 2),
        "the first sentence finished": ([1, 1, 1], 3, 1),
        "hypotheses of two sentences in one run": ([0, 0, 1, 1, 1, 0], 1, 6),
    }
    for name, (rows, copies, kept) in cases.items():
        rows = torch.tensor(rows)
        source = per_sentence.for_rows(rows, 3)
        assert (source.copies, source.keys.size(0)) == (copies, kept), name
        decoder_rows = torch.arange(rows.numel())
        out, weights = layer(h[decoder_rows], g[decoder_rows], source)
        expected_out, expected_weights = layer(h[decoder_rows], g[decoder_rows], per_hypothesis.index_select(rows * 3))
        assert torch.allclose(out, expected_out, rtol=1e-12, atol=1e-12), name
        assert torch.allclose(weights, expected_weights, rtol=1e-12, atol=1e-12), name
