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

The mixture is computed in log space, log P = logaddexp(log p_gen + log_softmax(logits),
log(1 − p_gen) + log copy), so a saturated gate never turns into log 0; words absent
from the source get a copy probability of ``COPY_FLOOR`` instead of 0, which keeps
the gradient finite.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .weight_norm import WeightNormLinear

COPY_FLOOR = 1e-30
"""Copy probability of a word the source does not contain (its log is finite)."""


def copy_distribution(attention: Tensor, source_tokens: Tensor, vocab_size: int) -> Tensor:
    """Σ_{j: x_j = w} a_ij for every word w: attention (b x t x s) summed by source token (b x s)."""
    index = source_tokens.unsqueeze(1).expand_as(attention)
    return attention.new_zeros(*attention.shape[:2], vocab_size).scatter_add_(2, index, attention)


def mix_generate_and_copy(logits: Tensor, gate_logit: Tensor, copy_probs: Tensor) -> Tensor:
    """log(p_gen · softmax(logits) + (1 − p_gen) · copy), p_gen = σ(gate_logit) (b x t x 1)."""
    generate = F.log_softmax(logits, dim=-1) + F.logsigmoid(gate_logit)
    copy = copy_probs.clamp_min(COPY_FLOOR).log() + F.logsigmoid(-gate_logit)
    return torch.logaddexp(generate, copy)


class PointerGenerator(nn.Module):
    """The gate p_gen and the mixture of generating and copying; returns log-probabilities."""

    def __init__(self, state_dim: int, context_dim: int, embed_dim: int):
        super().__init__()
        self.gate = WeightNormLinear(state_dim + context_dim + embed_dim, 1)

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
        """Log-probabilities (b x t x vocab) of the mixture."""
        gate_logit = self.generation_probability(state, context, target_embedding)
        copy_probs = copy_distribution(attention.type_as(logits), source_tokens, logits.size(-1))
        return mix_generate_and_copy(logits, gate_logit, copy_probs)
