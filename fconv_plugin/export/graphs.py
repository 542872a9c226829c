"""The two graphs of an exported model: the encoder, and one decoder step with its state explicit.

Both run the plugin's own encoder and decoder (on a copy whose weight normalisation is
folded, ``plain_layers.py``); the step graph fills the decoder's incremental state
from its inputs and returns what the step left in it:

- each decoder convolution with k > 1 keeps its last k - 1 inputs (``causal_convolution.py``);
- every attention layer reads the same encoder outputs (§3.3): the keys z (batch x
  embed x src_len) and the values (z + e) · √0.5, given once for all layers and once
  per sentence, shared by its hypotheses;
- a copying (pointer-generator) model also reads the source tokens, which its mixture
  scatters the averaged attention onto (``pointer_generator.py``): one more input.

A runtime keeps one row of state per hypothesis, reorders the rows with the beams, and
moves a sentence's keys and values only when sentences leave the batch.
"""

import copy
from typing import List, Tuple

from torch import Tensor, nn

from ..errors import FConvError
from ..modules.attention import AttentionSource, source_length_scale
from ..modules.causal_convolution import CausalConvolution
from .plain_layers import fold_weight_norm_


def exportable_copy(model: nn.Module, int8: bool = False) -> nn.Module:
    """An inference copy of a trained fconv model with plain (folded) weights, or with
    ``int8`` its int8 form (``FConvModel.quantize_int8_``: fconv-quantize's per-row
    scales and float64 attention sums, so the graphs compute what torch's int8 does)."""
    model = copy.deepcopy(model).float()
    model.eval()  # (a model fairseq prepared for generation returns None from eval())
    if int8:
        model.quantize_int8_()
    fold_weight_norm_(model)
    # no attention returned; the step graph hands the decoder its attention source itself
    model.decoder.make_generation_fast_(need_attn=False, beamable_mm_beam_size=None)
    return model


class EncoderGraph(nn.Module):
    """src_tokens (batch x src_len, left-padded, ending in EOS) → keys, values."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.encoder = model.encoder

    def forward(self, src_tokens: Tensor) -> Tuple[Tensor, Tensor]:
        # the mask always: one graph serves padded and unpadded batches
        out = self.encoder.encode(src_tokens, src_tokens.eq(self.encoder.padding_idx))
        source = AttentionSource.from_encoder(out["encoder_out"], out["encoder_padding_mask"])
        return source.keys, source.values


class DecoderStepGraph(nn.Module):
    """One step of beam search for every hypothesis of every sentence.

    Inputs: the tokens so far (sentences x copies x t, starting with EOS; copies: the
    beam), each sentence's keys and values, its padding mask (sentences x src_len, True
    at padding), for a copying model its source tokens (sentences x src_len), the search's
    inputs (``select_candidates``), and each convolution's state (sentences x copies x
    (k - 1) x in_channels). Outputs: log-probabilities of the next token (sentences ·
    copies x vocabulary), the candidates, then every convolution's new state. A
    sentence's hypotheses attend through one product against its one copy of the keys
    and values (``AttentionSource`` with ``copies``), as the torch model does in beam
    search.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.decoder = model.decoder
        self.stateful = [conv for conv in self.decoder.convolutions if conv.kernel_size > 1]
        if any(isinstance(conv, CausalConvolution) for conv in self.stateful):  # conv_tbc: no ONNX translation
            raise FConvError("the decoder step graph needs the plain convolutions; build it from exportable_copy(model)")

    def state_shapes(self) -> List[Tuple[int, int]]:
        """(k - 1, in_channels) of each state input, in order."""
        return [(conv.kernel_size - 1, conv.in_channels) for conv in self.stateful]

    @property
    def copying(self) -> bool:
        """Whether the step reads the source tokens (a pointer-generator model)."""
        return getattr(self.decoder, "pointer_generator", None) is not None

    def forward(self, prev_tokens: Tensor, keys: Tensor, values: Tensor, padding_mask: Tensor, *rest: Tensor):
        sentences, copies = prev_tokens.shape[:2]
        source_tokens, rest = (rest[0], rest[1:]) if self.copying else (None, rest)
        token_penalty, beam_scores, states = rest[0], rest[1], rest[2:]
        incremental_state = {}
        for conv, state in zip(self.stateful, states):
            conv.set_input_history(incremental_state, state.flatten(0, 1))
        source = AttentionSource(keys=keys, values=values, padding_mask=padding_mask,
                                 length_scale=source_length_scale(values, padding_mask), copies=copies,
                                 tokens=source_tokens)
        self.decoder.cache_attention_source(incremental_state, source)
        logits, _ = self.decoder(prev_tokens.flatten(0, 1), incremental_state=incremental_state)
        log_probs = self.decoder.get_normalized_probs((logits, None), log_probs=True)[:, -1, :]
        new_states = [conv.input_history(incremental_state).unflatten(0, (sentences, copies)) for conv in self.stateful]
        return (log_probs, *select_candidates(log_probs, token_penalty, beam_scores), *new_states)


def select_candidates(log_probs: Tensor, token_penalty: Tensor, beam_scores: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Beam search's choice of candidates (§4.3), inside the step graph: every sentence's
    2 x beam best extensions, as fairseq's ``BeamSearch.step`` takes them.

    ``token_penalty`` (vocabulary) carries the step's rules as one row added to every
    hypothesis' log-probabilities: -inf for <pad> (and for </s> before the minimum
    length, or for all but </s> at the maximum), minus the unk penalty for <unk>, else 0;
    ``beam_scores`` (sentences x beam) are the hypotheses' cumulative scores (at the first
    step 0 for the first hypothesis and -inf for the rest, whose tokens are the same).
    Returns the candidates' scores and flat indices (beam · vocabulary + token), best
    first and the lower index first among equals (ONNX TopK's order, fairseq's on the
    CPU), and each row's sum of log-probabilities, NaN or +inf where fairseq's rule for a
    NaN has to be applied to the whole rows first (``fconv_onnx.beam_search``)."""
    sentences, copies = beam_scores.shape
    expanded = (log_probs + token_penalty).view(sentences, copies, -1) + beam_scores.unsqueeze(-1)
    cand_scores, cand_index = expanded.view(sentences, -1).topk(2 * copies, dim=1)
    return cand_scores, cand_index, log_probs.sum(dim=1)
