"""The pointer-generator mixture against a float64 re-computation written from See et al. (2017)."""

import math

import torch

from fconv_plugin.modules.pointer_generator import COPY_FLOOR, PointerGenerator, log_sigmoid, mix_generate_and_copy, softplus

VOCAB = 9


def _inputs(batch=2, steps=3, src_len=4, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, steps, VOCAB, dtype=dtype, generator=generator)
    attention = torch.softmax(torch.randn(batch, steps, src_len, dtype=dtype, generator=generator), dim=-1)
    # a repeated word (5 twice in row 0) must receive the sum of its attention
    source_tokens = torch.tensor([[5, 7, 5, 2], [3, 4, 6, 2]])
    return logits, attention, source_tokens


def _reference_probabilities(logits, gate_logit, attention, source_tokens):
    """P(w) = p_gen softmax(logits)_w + (1 - p_gen) Σ_{j: x_j = w} a_j, one entry at a time."""
    batch, steps, vocab = logits.shape
    expected = torch.empty_like(logits)
    for b in range(batch):
        for t in range(steps):
            p_gen = 1.0 / (1.0 + math.exp(-float(gate_logit[b, t, 0])))
            exps = [math.exp(float(v)) for v in logits[b, t]]
            for w in range(vocab):
                copied = sum(float(attention[b, t, j]) for j in range(source_tokens.size(1)) if source_tokens[b, j] == w)
                expected[b, t, w] = p_gen * exps[w] / sum(exps) + (1.0 - p_gen) * copied
    return expected


def _copy_probabilities(attention, source_tokens):
    """Σ_{j: x_j = w} a_j for every word, one entry at a time."""
    batch, steps, src_len = attention.shape
    copy = torch.zeros(batch, steps, VOCAB, dtype=attention.dtype)
    for b in range(batch):
        for t in range(steps):
            for j in range(src_len):
                copy[b, t, source_tokens[b, j]] += attention[b, t, j]
    return copy


def test_the_mixture_matches_the_float64_recomputation():
    logits, attention, source_tokens = _inputs()
    gate_logit = torch.tensor([[[0.3], [-1.2], [2.0]], [[0.0], [4.0], [-3.5]]], dtype=torch.float64)
    log_probs = mix_generate_and_copy(logits, gate_logit, attention, source_tokens)
    expected = _reference_probabilities(logits, gate_logit, attention, source_tokens)
    # words in neither distribution's support are impossible here: softmax covers all words
    assert torch.allclose(log_probs.exp(), expected, rtol=1e-12, atol=1e-15)
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(2, 3, dtype=torch.float64), atol=VOCAB * COPY_FLOOR + 1e-12)


def test_p_gen_one_is_the_vocabulary_softmax_and_p_gen_zero_is_the_copy_distribution():
    logits, attention, source_tokens = _inputs()
    copy = _copy_probabilities(attention, source_tokens)
    assert torch.allclose(copy[0, :, 5], attention[0, :, 0] + attention[0, :, 2], rtol=1e-12)  # repeated word
    saturated = torch.full((2, 3, 1), 200.0, dtype=torch.float64)  # σ(200) = 1 in float64
    generate_only = mix_generate_and_copy(logits, saturated, attention, source_tokens)
    assert torch.allclose(generate_only, torch.log_softmax(logits, dim=-1), rtol=1e-12, atol=1e-12)

    copy_only = mix_generate_and_copy(logits, -saturated, attention, source_tokens)
    in_source = copy > 0
    assert torch.allclose(copy_only.exp()[in_source], copy[in_source], rtol=1e-12)
    assert float(copy_only.exp()[~in_source].max()) < 2 * COPY_FLOOR  # words absent from the source: never
    assert torch.isfinite(copy_only).all()


def test_a_padded_source_copies_nothing_from_its_padding():
    logits, attention, source_tokens = _inputs()
    source_tokens = source_tokens.clone()
    source_tokens[1, :2] = 1  # left padding, which the attention gives no weight
    attention = attention.clone()
    attention[1, :, :2] = 0
    attention[1] /= attention[1].sum(-1, keepdim=True)
    gate_logit = torch.full((2, 3, 1), -0.7, dtype=torch.float64)
    log_probs = mix_generate_and_copy(logits, gate_logit, attention, source_tokens)
    expected = _reference_probabilities(logits, gate_logit, attention, source_tokens)
    assert torch.allclose(log_probs.exp(), expected, rtol=1e-12, atol=1e-15)


def test_gradients_of_the_whole_layer_pass_gradcheck():
    torch.manual_seed(0)
    layer = PointerGenerator(state_dim=5, context_dim=4, embed_dim=3).double()
    logits, attention, source_tokens = _inputs()
    state = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    context = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    embedding = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    logits.requires_grad_(True)
    attention.requires_grad_(True)

    def function(logits, state, context, embedding, attention):
        return layer(logits, state, context, embedding, attention, source_tokens)

    assert torch.autograd.gradcheck(function, (logits, state, context, embedding, attention))
    # and through the gate's own parameters
    parameters = [layer.gate.weight_g, layer.gate.weight_v, layer.gate.bias]
    loss = function(logits, state, context, embedding, attention)[..., 5].sum()
    grads = torch.autograd.grad(loss, parameters)
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)


def test_the_gate_reads_state_context_and_target_embedding():
    torch.manual_seed(0)
    layer = PointerGenerator(state_dim=5, context_dim=4, embed_dim=3).double()
    state, context, embedding = (torch.randn(2, 3, n, dtype=torch.float64) for n in (5, 4, 3))
    w = layer.gate.normalized_weight().view(-1)
    expected = state @ w[:5] + context @ w[5:9] + embedding @ w[9:] + layer.gate.bias
    actual = layer.generation_probability(state, context, embedding).squeeze(-1)
    assert torch.allclose(actual, expected, rtol=1e-12)


def test_softplus_and_log_sigmoid_stay_finite_and_exact_far_out():
    """Against math.log1p(math.exp(x)) in Python's double precision, and x itself where exp overflows."""
    xs = [-1000.0, -100.0, -88.8, -20.0, -1.0, 0.0, 1e-3, 1.0, 20.0, 88.8, 100.0, 1000.0]
    expected = [x if x > 700 else math.log1p(math.exp(x)) for x in xs]
    for dtype, tolerance in ((torch.float32, 1e-6), (torch.float64, 1e-15)):
        got = softplus(torch.tensor(xs, dtype=dtype)).tolist()
        assert all(abs(g - e) <= tolerance * max(1.0, abs(e)) for g, e in zip(got, expected)), (dtype, got)
        got = log_sigmoid(torch.tensor(xs, dtype=dtype)).tolist()
        assert all(abs(g + (-x if -x > 700 else math.log1p(math.exp(-x)))) <= tolerance * max(1.0, abs(x))
                   for g, x in zip(got, xs)), (dtype, got)
