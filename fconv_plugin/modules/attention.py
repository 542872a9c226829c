"""Multi-step attention (Gehring et al. 2017, §3.3).

Every decoder layer l with attention combines its state h_i with the embedding g_i of
the previous target element into a query d_i = (W h_i + b + g_i) · √0.5, attends over
the encoder outputs z_j (the keys), and reads the values z_j + e_j:

    a_ij = softmax_j(d_i · z_j),    c_i = Σ_j a_ij (z_j + e_j)

c_i is scaled by s·√(1/s), s the (unpadded) source length, to undo the change of
variance of a weighted sum of s vectors (§3.4), projected back to the layer width
and added to h_i: (W c_i + h_i) · √0.5.

In beam search every sentence's encoder outputs are repeated once per hypothesis. An
``AttentionSource`` can hold them once per sentence instead (``copies`` > 1): the
queries of a sentence's hypotheses then go through one matrix product against one
copy of its keys and values (the idea of fairseq's BeamableMM). Laying a source out for
beam search's rows and following its reorderings is the model's business
(``models/attention_rows.py``), not the paper's.

The sums over the source (the scores d·z with their softmax, and the weighted read)
are one small module, ``AttentionSums``: float32 as torch computes them. int8 models swap in
a form that sums in float64 (``deployment/int8.py``), the way they swap their other layers.
"""

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .conv_block import SQRT_HALF
from .weight_norm import WeightNormLinear


@dataclass
class AttentionSource:
    """Encoder outputs laid out for attention, prepared once per source sentence."""

    keys: Tensor  # z, batch x embed x src_len
    values: Tensor  # (z + e) · √0.5, batch x src_len x embed
    padding_mask: Optional[Tensor]  # batch x src_len, True at padding
    length_scale: Union[float, Tensor]  # s · √(1/s), a float or batch x 1 x 1
    copies: int = 1  # decoder rows per source row: the beam when shared across it
    tokens: Optional[Tensor] = None  # batch x src_len source words, kept for copying them

    @classmethod
    def from_encoder(
        cls, encoder_out: Tuple[Tensor, Tensor], padding_mask: Optional[Tensor], tokens: Optional[Tensor] = None
    ) -> "AttentionSource":
        keys, values = encoder_out
        return cls(
            keys=keys.transpose(1, 2).contiguous(),
            values=values,
            padding_mask=padding_mask,
            length_scale=source_length_scale(values, padding_mask),
            tokens=tokens,
        )

    def summed_by(self, sums: "AttentionSums") -> "AttentionSource":
        """This source with its keys and values in the form ``sums`` multiplies them in,
        converted once per source instead of once per decoding step."""
        return dataclasses.replace(self, keys=sums.operand(self.keys), values=sums.operand(self.values))

    def read(self, weights: Tensor, sums: "AttentionSums") -> Tensor:
        """c_i = Σ_j a_ij (z_j + e_j) · s√(1/s) for attention weights (decoder rows x tgt x src)."""
        rows, steps = weights.shape[:2]
        if self.copies > 1:  # a sentence's hypotheses together against its one copy
            weights = weights.reshape(rows // self.copies, self.copies * steps, -1)
        context = sums.product(weights, self.values) * self.length_scale
        return context.view(rows, steps, -1)

    def tokens_per_row(self) -> Tensor:
        """The source words of every decoder row (rows x src_len)."""
        if self.tokens is None:
            raise ValueError("this attention source was built without its source tokens")
        if self.copies == 1:
            return self.tokens
        sentences, length = self.tokens.shape
        return self.tokens.unsqueeze(1).expand(sentences, self.copies, length).reshape(sentences * self.copies, length)


def source_length_scale(values: Tensor, padding_mask: Optional[Tensor]) -> Union[float, Tensor]:
    """s · √(1/s) per source (§3.4), computed in float64 with or without padding, so a
    sentence gets the same float32 scale alone or in a padded batch."""
    if padding_mask is None:
        length = values.size(1)
        return length * math.sqrt(1.0 / length)
    lengths = (values.size(1) - padding_mask.sum(dim=1, dtype=torch.float64)).view(-1, 1, 1)
    return (lengths * lengths.rsqrt()).to(values.dtype)


class AttentionSums(nn.Module):
    """The attention's sums over the source: batched products and the softmax, in float32.

    No parameters: it adds nothing to the state dict. Its int8 form
    (``deployment/int8.BatchInvariantSums``) sums in float64 instead. In mixed precision
    (``FConvModel.compute_in_``) the softmax runs in ``softmax_dtype`` (float32) and its
    weights go back to the products' dtype."""

    softmax_dtype: Optional[torch.dtype] = None  # None: the scores' own dtype

    def operand(self, source: Tensor) -> Tensor:
        """Keys or values (``AttentionSource``) as ``product`` takes its second operand: as they are."""
        return source

    def product(self, a: Tensor, b: Tensor) -> Tensor:
        """``torch.bmm(a, b)``."""
        return torch.bmm(a, b)

    def weights(self, query: Tensor, keys: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
        """a_ij = softmax_j(d_i · z_j) over the real source words (§3.3); b x tgt x src."""
        scores = self.product(query, keys)
        if padding_mask is not None:
            scores = scores.masked_fill(padding_mask.unsqueeze(1), float("-inf"))
        if self.softmax_dtype is None or scores.dtype == self.softmax_dtype:
            return torch.softmax(scores, dim=-1)
        return torch.softmax(scores, dim=-1, dtype=self.softmax_dtype).to(scores.dtype)

    def precise(self, values: Tensor) -> Tensor:
        """``values`` in the precision for functions of source positions (a copying
        model's log and softplus per source word): as they are."""
        return values


class AttentionLayer(nn.Module):
    """The attention of one decoder layer; named and shaped like fairseq's."""

    def __init__(self, conv_channels: int, embed_dim: int):
        super().__init__()
        self.in_projection = WeightNormLinear(conv_channels, embed_dim)
        self.out_projection = WeightNormLinear(embed_dim, conv_channels)
        self.sums = AttentionSums()

    def forward(self, h: Tensor, target_embedding: Tensor, source: AttentionSource) -> Tuple[Tensor, Tensor]:
        """``h``: batch x tgt_len x channels. Returns the new state and a (b x tgt x src)."""
        return self.attend(h, target_embedding, source, self.in_projection, self.out_projection)

    def attend(self, h: Tensor, target_embedding: Tensor, source: AttentionSource,
               project_in: Callable[[Tensor], Tensor], project_out: Callable[[Tensor], Tensor]) -> Tuple[Tensor, Tensor]:
        """The layer's arithmetic with its two projections given as functions: ``forward``'s
        modules, or the decoder step's functions of a matrix of rows (``h`` rows x channels,
        one target position). Returns the new state, shaped as ``h``, and a (b x tgt x src)."""
        query = project_in(h).add_(target_embedding).mul_(SQRT_HALF)  # (W h + b + g) · √0.5, in place
        rows, embed = query.size(0), query.size(-1)
        steps = query.numel() // (rows * embed)
        # a sentence's hypotheses together (copies > 1): sentences x copies·tgt x embed
        query = query.reshape(rows // source.copies, source.copies * steps, embed)
        weights = self.sums.weights(query, source.keys, source.padding_mask).view(rows, steps, -1)
        context = source.read(weights, self.sums).view(h.shape[:-1] + (embed,))
        return project_out(context).add_(h).mul_(SQRT_HALF), weights
