"""Copying source words: the pointer-generator (See et al. 2017, "Get To The Point", §2.2).

At every target step the output distribution mixes generating from the vocabulary
with copying a source word, using the decoder's multi-step attention (Gehring et al.
2017, §3.3) averaged over its layers as the copy distribution:

    p_gen = σ(w_h · h_i + w_c · c_i + w_g · g_i + b)
    P(w)  = p_gen · softmax(logits)_w + (1 − p_gen) · Σ_{j: x_j = w} ā_ij

h_i is the decoder's output state (the input of the output layer), ā_ij the attention
averaged over the layers, c_i = Σ_j ā_ij (z_j + e_j) its context, and g_i the embedding
of the previous target word. With a joined dictionary the source tokens x_j index the
target vocabulary, so copying needs no extra symbols.

The mixture is computed in log space, and only where copying changes it: every word
gets log p_gen + log_softmax(logits), and each source word w then adds
softplus(log(1 − p_gen) + log copy_w − that), which makes it logaddexp of the two
parts. So beside the softmax the cost grows with the source length, not the
vocabulary, a saturated gate never turns into log 0, and padding (attention 0) gets a
copy probability of ``COPY_FLOOR`` instead of 0, which keeps its gradient finite.
"""

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import AttentionSource, AttentionSums
from .weight_norm import WeightNormLinear

COPY_FLOOR = 1e-30
"""Copy probability of a word the source does not contain (its log is finite)."""

PLAIN_SUMS = AttentionSums()


def softplus(x: Tensor) -> Tensor:
    """log(1 + eˣ) = max(x, 0) + log(1 + e^−|x|), finite wherever x is, written out so that
    every runtime computes it so (an exported graph carries these elementwise ops, no kernel
    of its own)."""
    return x.clamp_min(0) + torch.log1p(torch.exp(-x.abs()))


def log_sigmoid(x: Tensor) -> Tensor:
    """log σ(x) = −softplus(−x), finite wherever x is: torch's logsigmoid exports to ONNX as
    log(σ(x)), which is −inf below x ≈ −88, and a trained gate's p_gen gets there (the
    mixture then turned to NaN and the beam never finished)."""
    return -softplus(-x)


def mix_generate_and_copy(logits: Tensor, gate_logit: Tensor, attention: Tensor, source_tokens: Tensor,
                          sums: Optional[AttentionSums] = None) -> Tensor:
    """log(p_gen · softmax(logits) + (1 − p_gen) · Σ_{j: x_j = w} a_j) for every word w.

    ``logits`` b x t x vocab, ``gate_logit`` (p_gen = σ(gate_logit)) b x t x 1,
    ``attention`` b x t x s, ``source_tokens`` b x s. ``sums`` sums over the source and
    sets the precision of the functions of source positions (default: float32, as torch).
    """
    sums = PLAIN_SUMS if sums is None else sums
    gate_logit, attention = sums.precise(gate_logit), sums.precise(attention)
    log_p_gen = log_sigmoid(gate_logit)
    generate = F.log_softmax(logits, dim=-1)
    same_word = source_tokens.unsqueeze(2).eq(source_tokens.unsqueeze(1))  # b x s x s
    copy = sums.product(attention, same_word.type_as(attention))  # copy_w at each of w's positions
    first = ~same_word.tril(-1).any(dim=-1, keepdim=True).transpose(1, 2)  # b x 1 x s: w's first position
    index = source_tokens.unsqueeze(1).expand_as(attention)
    generated_there = generate.gather(2, index) + log_p_gen
    correction = softplus(log_sigmoid(-gate_logit) + copy.clamp_min(COPY_FLOOR).log() - generated_there)
    correction = torch.where(first, correction, torch.zeros_like(correction)).to(generate.dtype)
    return (generate + log_p_gen.to(generate.dtype)).scatter_add_(2, index, correction)


class PointerGenerator(nn.Module):
    """The gate p_gen and the mixture of generating and copying; returns log-probabilities."""

    def __init__(self, state_dim: int, context_dim: int, embed_dim: int):
        super().__init__()
        self.gate = WeightNormLinear(state_dim + context_dim + embed_dim, 1)
        self.sums = AttentionSums()  # the sums over the source, as the attention layers' (int8: float64)

    def context(self, source: AttentionSource, attention: Tensor) -> Tensor:
        """c_i = Σ_j ā_ij (z_j + e_j), the averaged attention's read of the source."""
        return source.read(attention, self.sums)

    def generation_probability(self, state: Tensor, context: Tensor, target_embedding: Tensor) -> Tensor:
        """p_gen's logit (b x t x 1) from h_i, c_i and g_i."""
        return self.gate(torch.cat([state, context, target_embedding], dim=-1))

    def forward(
        self,
        logits: Tensor,
        state: Tensor,
        context: Tensor,
        target_embedding: Tensor,
        attention: Tensor,
        source_tokens: Tensor,
    ) -> Tensor:
        """Log-probabilities (b x t x vocab) of the mixture; float32 in mixed precision, as the
        loss reads them (``AttentionSums.softmax_dtype``)."""
        gate_logit = self.generation_probability(state, context, target_embedding)
        if self.sums.softmax_dtype is not None:
            logits, gate_logit = logits.to(self.sums.softmax_dtype), gate_logit.to(self.sums.softmax_dtype)
        return mix_generate_and_copy(logits, gate_logit, attention.type_as(logits), source_tokens, self.sums)
