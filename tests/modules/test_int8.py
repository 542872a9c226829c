"""int8 weights against float64 re-computations with the same (dequantised) weights."""

import torch

from fconv_plugin.modules.int8 import Int8Weight


def test_each_row_is_rounded_to_its_own_scale():
    weight = torch.tensor([[1.27, -0.5, 0.0], [0.001, 0.002, -0.00254]])
    int8 = Int8Weight.from_float(weight)
    assert int8.weight.dtype == torch.int8
    assert torch.allclose(int8.scale, torch.tensor([0.01, 0.00002]))
    assert int8.weight.tolist() == [[127, -50, 0], [50, 100, -127]]  # by hand: w / scale, rounded
    assert (int8.dequantized() - weight).abs().le(int8.scale.unsqueeze(1) / 2 + 1e-9).all()


def test_linear_is_close_to_float64_with_the_dequantised_weight():
    torch.manual_seed(0)
    int8 = Int8Weight.from_float(torch.randn(48, 64))
    bias = torch.randn(48)
    x = torch.randn(5, 7, 64)
    expected = x.double() @ int8.dequantized().double().t() + bias.double()
    actual = int8.linear(x, bias)
    assert actual.shape == (5, 7, 48)
    # activations are quantised to 7 bits per call: ~1% of the output's range
    assert (actual.double() - expected).abs().max() < 0.02 * expected.abs().max()


def test_convolution_over_windows_matches_conv_tbc_in_float64():
    torch.manual_seed(1)
    k, c_in, c_out = 3, 16, 24
    kernel = torch.randn(k, c_in, c_out)
    int8 = Int8Weight.from_float(kernel.reshape(-1, c_out).t())
    bias = torch.randn(c_out)
    x = torch.randn(9, 2, c_in)
    dequantized_kernel = int8.dequantized().t().reshape(k, c_in, c_out)
    expected = torch.conv_tbc(x.double(), dequantized_kernel.double(), bias.double(), 1)
    actual = int8.convolve_tbc(x, k, padding=1, bias=bias)
    assert actual.shape == expected.shape == (9, 2, c_out)
    assert (actual.double() - expected).abs().max() < 0.02 * expected.abs().max()


def test_embedding_rows_are_the_dequantised_rows():
    table = torch.randn(10, 6)
    int8 = Int8Weight.from_float(table)
    indices = torch.tensor([[3, 0], [9, 3]])
    assert torch.equal(int8.embedding(indices), int8.dequantized()[indices])
