"""The two graphs of an exported model: the encoder, and one decoder step with its state explicit.

Both run the plugin's own encoder and decoder (on a copy whose weight normalisation is
folded, ``plain_layers.py``). The step graph is the inference core's step
(``decoding/steps.py``, its Python form): matrices of rows, the newest tokens and
their position number in, each layer one product with its bias (ONNX Gemm):

- each decoder convolution with k > 1 keeps its last k - 1 inputs, flattened per row
  (``causal_convolution.py``);
- every attention layer reads the same encoder outputs (§3.3): the keys z (batch x
  embed x src_len), the values (z + e) · √0.5 and the length scale s · √(1/s) (§3.4),
  computed by the encoder graph once per batch, given once for all layers and once per
  sentence, shared by its hypotheses;
- a copying (pointer-generator) model also reads the source tokens, which its mixture
  scatters the averaged attention onto (``pointer_generator.py``): one more input.

A runtime keeps one row of state per hypothesis, reorders the rows with the beams, and
moves a sentence's keys and values only when sentences leave the batch.
"""

import copy
from typing import List, Optional, Tuple

from torch import Tensor, nn

from ..errors import FConvError
from ..decoding.steps import DecoderSteps, DecodingState
from ..modules.attention import AttentionSource
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
    """src_tokens (batch x src_len, left-padded, ending in EOS) → keys, values and each
    sentence's length scale s · √(1/s) (batch x 1 x 1, §3.4): once per batch what every
    step's attention reads, keys and values in the form its sums take them (int8's float64)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.encoder = model.encoder
        attention = [layer for layer in model.decoder.attention if layer is not None]
        self.sums = attention[0].sums if attention else None

    def forward(self, src_tokens: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        # the mask always: one graph serves padded and unpadded batches
        out = self.encoder.encode(src_tokens, src_tokens.eq(self.encoder.padding_idx))
        source = AttentionSource.from_encoder(out["encoder_out"], out["encoder_padding_mask"])
        if self.sums is not None:
            source = source.summed_by(self.sums)
        return source.keys, source.values, source.length_scale


class DecoderStepGraph(nn.Module):
    """One step of beam search for every hypothesis of every sentence: the inference core's
    decoder step (``DecoderSteps``, its Python form: matrices of rows, the newest tokens in).

    Inputs: the newest tokens (sentences x copies; copies: the beam) and their position
    number (0-dim, as ``make_positions`` numbers it), each sentence's keys, values, length
    scale and padding mask (sentences x src_len, True at padding), for a copying model its
    source tokens (sentences x src_len), the search's inputs (``select_candidates``), the
    beams' order (sentences · copies: row r extends the previous step's row order[r]), and
    each block's history as the previous step left it (its rows x (k - 1) · in_channels,
    oldest input first). Outputs: log-probabilities of the next token (sentences · copies
    x vocabulary), the candidates, then every history's next value (sentences · copies
    rows), which a runtime passes back as they are. A sentence's hypotheses attend through
    one product against its one copy of the keys and values (``AttentionSource`` with
    ``copies``), as the torch model does in beam search.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.decoder = model.decoder
        # conv_tbc has no ONNX translation
        if any(isinstance(conv, CausalConvolution) for conv in self.decoder.convolutions):
            raise FConvError("the decoder step graph needs the plain convolutions; build it from exportable_copy(model)")
        self.steps = DecoderSteps(model, compiled=False)
        self.kept = [index for index, width in enumerate(self.steps.history_widths()) if width]

    def state_shapes(self) -> List[Tuple[int, int]]:
        """(k - 1, in_channels) of each state input, in order: blocks with k > 1."""
        plans = [self.decoder.plans[index] for index in self.kept]
        return [(plan.kernel_size - 1, plan.in_channels) for plan in plans]

    @property
    def copying(self) -> bool:
        """Whether the step reads the source tokens (a pointer-generator model)."""
        return getattr(self.decoder, "pointer_generator", None) is not None

    def forward(self, tokens: Tensor, position: Tensor, keys: Tensor, values: Tensor, length_scale: Tensor,
                padding_mask: Tensor, *rest: Tensor):
        sentences, copies = tokens.shape
        source_tokens, rest = (rest[0], rest[1:]) if self.copying else (None, rest)
        token_penalty, beam_scores, order, states = rest[0], rest[1], rest[2], rest[3:]
        histories: List[Optional[Tensor]] = [None] * len(self.decoder.plans)
        for index, state in zip(self.kept, states):  # each row's history: the one its hypothesis extends
            histories[index] = state.index_select(0, order)
        source = AttentionSource(keys=keys, values=values, padding_mask=padding_mask, length_scale=length_scale,
                                 copies=copies, tokens=source_tokens)
        state = DecodingState(self.steps.layers(), source, histories)
        log_probs, _ = self.steps.step(state, tokens.flatten(), position, attention=False)
        new_states = [state.histories[index] for index in self.kept]
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
