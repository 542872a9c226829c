"""Encoder gradient scaling (§3.4) against fairseq's GradMultiply, which its fconv uses."""

import torch
from fairseq.modules import GradMultiply

from fconv_plugin.modules.gradient_scaling import encoder_gradient_scale, scale_gradient


def test_forward_is_identity_and_backward_matches_fairseqs_grad_multiply():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(3, 4, dtype=torch.float64)
    y = scale_gradient(x, encoder_gradient_scale(4))
    assert torch.equal(y, x)
    (ours,) = torch.autograd.grad(y, x, upstream)
    (reference,) = torch.autograd.grad(GradMultiply.apply(x, 1.0 / (2.0 * 4)), x, upstream)
    assert torch.allclose(ours, reference, rtol=0, atol=1e-15)
    assert torch.allclose(ours, upstream / 8)  # by hand: four attention layers, 1 / (2 · 4)


def test_no_attention_leaves_the_gradient_alone():
    # fairseq would divide by zero here (docs/design.md: differences from fairseq's built-in fconv)
    assert encoder_gradient_scale(0) == 1.0
