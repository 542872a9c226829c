"""The plain (folded) layers against the weight-normalised ones, in float64."""

import torch

from fconv_plugin.export.plain_layers import PlainCausalConvolution, PlainConvTBC, PlainLinear, fold_weight_norm_
from fconv_plugin.modules.causal_convolution import CausalConvolution
from fconv_plugin.modules.weight_norm import WeightNormConvTBC, WeightNormLinear


def _randomised(layer):
    torch.manual_seed(3)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.normal_()
    return layer.double()


def test_linear_holds_g_times_v_over_its_norm():
    layer = _randomised(WeightNormLinear(6, 4))
    plain = PlainLinear(layer)
    v, g = layer.weight_v, layer.weight_g
    assert torch.allclose(plain.weight, g * v / v.norm(dim=1, keepdim=True))
    x = torch.randn(3, 5, 6, dtype=torch.float64)
    assert torch.allclose(plain(x), layer(x))


def test_convolution_as_conv1d_equals_conv_tbc_with_padding():
    layer = _randomised(WeightNormConvTBC(5, 8, 3))
    plain = PlainConvTBC(layer)
    x = torch.randn(7, 2, 5, dtype=torch.float64)
    for padding in (0, 1, 2):
        assert torch.allclose(plain.convolve(x, padding), layer.convolve(x, padding))


def test_causal_convolution_full_pass_and_steps_equal_the_original():
    layer = _randomised(CausalConvolution(5, 8, 3))
    plain = PlainCausalConvolution(layer)
    x = torch.randn(6, 2, 5, dtype=torch.float64)
    assert torch.allclose(plain(x), layer(x))
    state_plain, state_original = {}, {}
    for t in range(6):
        step = x[t].unsqueeze(1)  # batch x 1 x channels
        assert torch.allclose(plain(step, state_plain), layer(step, state_original))


def test_folding_replaces_every_weight_normalised_layer():
    model = torch.nn.Sequential(WeightNormLinear(4, 4), torch.nn.Sequential(WeightNormConvTBC(4, 4, 3)), CausalConvolution(4, 4, 2))
    fold_weight_norm_(model)
    assert [type(m) for m in (model[0], model[1][0], model[2])] == [PlainLinear, PlainConvTBC, PlainCausalConvolution]
    assert not any(name.endswith(("weight_g", "weight_v")) for name, _ in model.named_parameters())
