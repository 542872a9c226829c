import torch

from fconv_plugin.modules.gradient_scaling import encoder_gradient_scale, scale_gradient


def test_forward_is_identity_and_backward_is_scaled():
    x = torch.randn(3, 4, requires_grad=True)
    y = scale_gradient(x, encoder_gradient_scale(4))
    assert torch.equal(y, x)
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 1 / 8))


def test_no_attention_leaves_the_gradient_alone():
    assert encoder_gradient_scale(0) == 1.0
