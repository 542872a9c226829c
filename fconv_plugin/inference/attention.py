"""Every attention layer's weights, and a copying model's p_gen, for a sentence and its translation.

ConvS2S has one attention per decoder layer (Gehring et al. 2017, §3.3). Beam search
returns only their average; the layers themselves are read by running the model once
more over the chosen translation with teacher forcing, through the decoder's
``details`` output.
"""

import html
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from ..errors import FConvError


def teacher_forced_details(model, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor) -> dict:
    """The decoder's ``details`` for a batch read with teacher forcing: ``attention`` (one
    batch x tgt x src tensor per attention layer) and, for copying models, ``p_gen``.

    The model must be in eval mode: with dropout the weights read would be noise."""
    if model.training:
        raise FConvError("the model is in training mode (dropout on); call model.eval() before reading its attention")
    details = {}
    with torch.no_grad():
        encoder_out = model.encoder(src_tokens, src_lengths)
        model.decoder(prev_output_tokens, encoder_out=encoder_out, details=details)
    return details


def averaged_attention(model, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor) -> Tensor:
    """The attention averaged over the attention layers (batch x tgt x src): what
    ``--replace-unk`` and ``--print-alignment`` read (§5.1)."""
    return torch.stack(teacher_forced_details(model, src_tokens, src_lengths, prev_output_tokens)["attention"]).mean(dim=0)


def layer_attention(model, src_tokens: Tensor, target_tokens: Tensor) -> Tuple[List[Tensor], Optional[Tensor]]:
    """(each attention layer's weights, tgt_len x src_len; p_gen per target token or None).

    ``src_tokens`` and ``target_tokens`` are one sentence each, both ending in </s>."""
    eos = model.decoder.dictionary.eos()
    prev_output_tokens = torch.cat([target_tokens.new_tensor([eos]), target_tokens[:-1]]).unsqueeze(0)
    details = teacher_forced_details(model, src_tokens.unsqueeze(0), src_tokens.new_tensor([src_tokens.numel()]), prev_output_tokens)
    layers = [weights[0] for weights in details["attention"]]
    p_gen = details.get("p_gen")
    return layers, None if p_gen is None else p_gen[0]


def readable(pieces: List[str]) -> List[str]:
    """Token labels: Moses escapes undone, BPE continuation '@@' shown as '·'."""
    labels = []
    for piece in pieces:
        piece = html.unescape(piece).replace("@-@", "-")
        labels.append(piece[:-2] + "·" if piece.endswith("@@") else piece)
    return labels
