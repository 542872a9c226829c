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
