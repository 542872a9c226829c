"""Token and learned position embeddings (Gehring et al. 2017, §3.1).

Input elements x are embedded as w, their absolute positions as p, and the model
reads e = w + p (and g = w + p on the target side).
"""

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .initialization import EMBEDDING_STD
from .weight_norm import in_dtype_of


def make_positions(tokens: Tensor, padding_idx: int) -> Tensor:
    """Position numbers for ``tokens`` (batch x time), fairseq's convention.

    Non-padding tokens are numbered ``padding_idx + 1, padding_idx + 2, ...`` in order;
    padding gets ``padding_idx``. Counting only real tokens makes the numbering the
    same whether a sentence is padded on the left or on the right.
    """
    not_pad = tokens.ne(padding_idx)
    return torch.cumsum(not_pad, dim=1) * not_pad + padding_idx


class TokenEmbedding(nn.Embedding):
    """Word embedding w, drawn from N(0, 0.1) with a zero padding row (§3.5)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int):
        super().__init__(num_embeddings, embedding_dim, padding_idx=padding_idx)
        nn.init.normal_(self.weight, mean=0.0, std=EMBEDDING_STD)
        with torch.no_grad():
            self.weight[padding_idx].zero_()


class LearnedPositionalEmbedding(TokenEmbedding):
    """Absolute position embedding p, one learned row per position.

    As in fairseq's fconv the table has ``num_rows`` rows (``--max-source-positions``
    / ``--max-target-positions``, 1024 by default); rows up to ``padding_idx`` are
    never used, so a sentence can hold ``num_rows - padding_idx - 1`` tokens.
    """

    def __init__(self, num_rows: int, embedding_dim: int, padding_idx: int):
        super().__init__(num_rows, embedding_dim, padding_idx)
        self.max_positions = num_rows - padding_idx - 1

    def forward(self, tokens: Tensor, last_step_only: bool = False) -> Tensor:
        """Embeddings of the positions of ``tokens``; of the last column only if asked."""
        return self.at(positions_to_embed(tokens, self.padding_idx, last_step_only))

    def at(self, positions: Tensor) -> Tensor:
        """The embeddings of position numbers (as ``make_positions`` numbers them): what the
        decoder's step looks up, knowing the position without recounting the prefix."""
        return super().forward(positions)


def positions_to_embed(tokens: Tensor, padding_idx: int, last_step_only: bool) -> Tensor:
    """The position numbers of ``tokens``, or of their last column only (incremental decoding)."""
    positions = make_positions(tokens, padding_idx)
    return positions[:, -1:] if last_step_only else positions


def positional_embedding_or_none(
    enabled: bool, num_rows: int, embedding_dim: int, padding_idx: int
) -> Optional[LearnedPositionalEmbedding]:
    """The position embedding, or None for the paper's ablation without positions."""
    if not enabled:
        return None
    return LearnedPositionalEmbedding(num_rows, embedding_dim, padding_idx)


class SharedOutputEmbedding(nn.Linear):
    """The decoder's output layer when it shares the input embedding's table as its weight
    (``--share-input-output-embed``): y = x Wᵀ + b, in the dtype of its input (mixed
    precision: a float32 table, bfloat16 products). Named and shaped as fairseq's ``nn.Linear``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, *in_dtype_of(x, self.weight, self.bias))
