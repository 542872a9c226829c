import torch

from fconv_plugin.modules.causal_convolution import CausalConvolution


def _reference_causal_conv(conv, x):
    """y_t = b + sum_j W_j x_{t-k+1+j}, zeros before the start, in float64."""
    weight = conv.normalized_weight().double()
    x = x.double()
    k = conv.kernel_size
    out = torch.zeros(x.size(0), x.size(1), conv.out_channels, dtype=torch.float64)
    for t in range(x.size(0)):
        out[t] = conv.bias.double()
        for j in range(k):
            source = t - k + 1 + j
            if source >= 0:
                out[t] += x[source] @ weight[j]
    return out


def test_full_sequence_matches_a_float64_causal_convolution():
    conv = CausalConvolution(4, 6, 3)
    x = torch.randn(7, 2, 4)
    assert torch.allclose(conv(x).double(), _reference_causal_conv(conv, x), atol=1e-5)


def test_outputs_never_depend_on_later_inputs():
    conv = CausalConvolution(4, 6, 3)
    x = torch.randn(7, 2, 4)
    changed = x.clone()
    changed[5:] += 10.0
    assert torch.allclose(conv(x)[:5], conv(changed)[:5])


def test_step_by_step_equals_full_and_follows_beam_reordering():
    conv = CausalConvolution(4, 6, 3).eval()
    x = torch.randn(6, 3, 4)  # time x batch x channel
    order = torch.tensor([2, 0, 2])
    state = {}
    outputs = []
    with torch.no_grad():
        for t in range(6):
            if t == 3:
                conv.reorder_incremental_state(state, order)
            outputs.append(conv(x[t].unsqueeze(1), state))
        # after the reorder the rows carry the histories of rows 2, 0, 2
        reordered = torch.cat([x[:3][:, order], x[3:]], dim=0)
        full = conv(reordered)
    steps = torch.cat(outputs, dim=1).transpose(0, 1)
    assert torch.allclose(steps[3:], full[3:], atol=1e-6)
