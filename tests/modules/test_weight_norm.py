import torch

from fconv_plugin.modules.weight_norm import WeightNormConvTBC, WeightNormLinear


def test_linear_weight_is_g_times_v_over_row_norm_in_float64():
    layer = WeightNormLinear(5, 3).double()
    with torch.no_grad():
        layer.weight_g.copy_(torch.tensor([[2.0], [0.5], [3.0]], dtype=torch.float64))
    v = layer.weight_v.detach()
    expected = torch.stack([g * row / row.norm() for g, row in zip([2.0, 0.5, 3.0], v)])
    assert torch.allclose(layer.normalized_weight(), expected, rtol=1e-12)
    x = torch.randn(4, 5, dtype=torch.float64)
    assert torch.allclose(layer(x), x @ expected.t() + layer.bias, rtol=1e-12)


def test_conv_weight_is_normalised_per_output_channel():
    conv = WeightNormConvTBC(4, 6, 3).double()
    assert conv.weight_g.shape == (1, 1, 6)
    with torch.no_grad():
        conv.weight_g.mul_(torch.linspace(0.5, 2.0, 6, dtype=torch.float64).view(1, 1, 6))
    v = conv.weight_v.detach()
    g = conv.weight_g.detach().view(-1)
    for out in range(6):
        assert torch.allclose(conv.normalized_weight()[:, :, out], g[out] * v[:, :, out] / v[:, :, out].norm(), rtol=1e-12)


def test_weight_follows_optimizer_updates_made_through_data():
    layer = WeightNormLinear(3, 2)
    with torch.no_grad():
        before = layer.normalized_weight().clone()
    layer.weight_g.data.mul_(2.0)  # how fairseq's optimizers update parameters
    with torch.no_grad():
        after = layer.normalized_weight()
    assert torch.allclose(after, 2.0 * before)


def test_make_generation_fast_stores_the_weight_itself_as_one_copy():
    layer = WeightNormLinear(3, 2)
    with torch.no_grad():
        layer.weight_g.mul_(3.0)
        before = layer.normalized_weight().clone()
        x = torch.randn(4, 3)
        expected = layer(x)
    layer.make_generation_fast_()
    with torch.no_grad():
        assert layer.normalized_weight() is layer.weight_v
        assert torch.allclose(layer.weight_v, before)
        assert layer.weight_v.t().is_contiguous()
        assert torch.allclose(layer(x), expected, atol=1e-6)
    # the (g, v) pair still describes the same weight, e.g. for a saved state dict
    assert torch.allclose(torch._weight_norm(layer.weight_v, layer.weight_g, 0), before, atol=1e-6)


def _weight_from_g_and_v_in_float64(layer):
    """g · v / ‖v‖ recomputed here, the norm over every dimension but ``norm_dim``."""
    v, g = layer.weight_v.detach().double(), layer.weight_g.detach().double()
    dims = [d for d in range(v.dim()) if d != layer.norm_dim]
    return g * v / v.pow(2).sum(dim=dims, keepdim=True).sqrt()


def test_training_again_after_make_generation_fast_serves_the_updated_weight():
    linear, conv = WeightNormLinear(5, 3), WeightNormConvTBC(4, 6, 3)
    for layer in (linear, conv):
        layer.make_generation_fast_()
        layer.train(True)
        layer.weight_g.data.mul_(2.0)  # an optimizer step, through .data as fairseq's optimizers do
        layer.weight_v.data.add_(0.1)
        layer.eval()
    x = torch.randn(4, 5)
    sequence = torch.randn(7, 2, 4)  # time x batch x channel
    with torch.no_grad():
        out = linear(x)
        conv_out = conv.convolve(sequence, padding=1)
    expected = x.double() @ _weight_from_g_and_v_in_float64(linear).t() + linear.bias.double()
    assert torch.allclose(out.double(), expected, atol=1e-6)
    # the convolution by hand in float64: out[t] = b + sum_j x_padded[t + j] @ w[j]
    weight = _weight_from_g_and_v_in_float64(conv)  # kernel x in x out
    padded = torch.nn.functional.pad(sequence.double(), (0, 0, 0, 0, 1, 1))
    by_hand = torch.stack([
        conv.bias.double() + sum(padded[t + j] @ weight[j] for j in range(conv.kernel_size))
        for t in range(sequence.size(0))
    ])
    assert torch.allclose(conv_out.double(), by_hand, atol=1e-5)


def test_a_state_dict_loaded_after_make_generation_fast_is_used():
    fast, other = WeightNormLinear(5, 3), WeightNormLinear(5, 3)
    fast.make_generation_fast_()
    fast.load_state_dict(other.state_dict())
    x = torch.randn(2, 5)
    with torch.no_grad():
        expected = x.double() @ _weight_from_g_and_v_in_float64(other).t() + other.bias.double()
        assert torch.allclose(fast(x).double(), expected, atol=1e-6)
