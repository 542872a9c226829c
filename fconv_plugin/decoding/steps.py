"""The decoder one target position at a time, its state held in plain tensors (§3.2-3.3).

fairseq's incremental decoding hands the decoder the whole target prefix at every step,
keeps each convolution's last k - 1 inputs in a dictionary keyed per module, recounts the
positions from the prefix, and runs every layer as a module call on batch x 1 x channel
tensors. ``DecoderSteps`` runs the same arithmetic for the inference core's beam search
with less around it: the newest tokens and their position number in, each block's input
history a tensor in a list, and each layer a function of a matrix of rows (the layer's
``row_function``, float32 or int8) looked up once per search. The operations are the
decoder's own, in its order, so the log-probabilities are its bits
(``tests/decoding/test_steps.py``); fairseq-generate and fairseq-interactive keep
the decoder's ``forward``.

This is the step's torch form, the reference. Its compiled form
(``decoding/compiled_step.py`` over ``native/decoder_step.cpp``) makes the same ATen calls in
the same order, and an int8 model's same compiled loops, without Python between them; so the
same bits. The search's state (histories, attention source) is then held there, and a step
or a reordering is one call. Which runs is ``backend.py``'s choice; a decoder with
parts the compiled step does not know (a copying model, a shared output embedding, other
embeddings, other forms of the gate or of the attention's sums) runs the torch form.
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from ..errors import FConvError
from ..deployment import int8 as int8_layers
from ..modules import AttentionSource
from ..modules.conv_block import add_residual
from ..models import attention_rows
from ..models.fconv import FConvDecoder
from .. import backend
from . import compiled_step
from .layer_functions import BlockFunctions, LayerFunctions, row_function


@dataclass
class DecodingState:
    """What a step reads besides the newest tokens, one row per hypothesis; one per search,
    so searches in several threads share nothing but the model."""

    layers: LayerFunctions
    source: Optional[AttentionSource]  # the encoder outputs, once per sentence where shared
    # block l's last k - 1 inputs, rows x (k - 1)·in, oldest first; None where ``compiled`` holds them
    histories: Optional[List[Optional[Tensor]]]
    compiled: Optional[object] = None  # decoder_step.cpp's Decoding over these layers, where it runs them


class DecoderSteps:
    """Incremental decoding of an ``FConvDecoder`` with explicit state, for beam search.

    ``start`` prepares a search (the layers' functions, the attention source shared across
    each sentence's ``decoder.beam_size`` hypotheses, zero histories), ``log_probs`` decodes
    one position for every hypothesis, ``reorder`` follows the beams. ``compiled=False``
    keeps every step in Python (the reference the compiled step is tested against)."""

    def __init__(self, model, compiled: bool = True):
        self.decoder: FConvDecoder = model.decoder
        self.compiled = compiled

    @staticmethod
    def supports(model) -> bool:
        return isinstance(getattr(model, "decoder", None), FConvDecoder)

    def layers(self) -> LayerFunctions:
        """The decoder's layers as functions of a matrix of rows, looked up now (once per search)."""
        decoder = self.decoder
        blocks = [
            BlockFunctions(
                convolve=row_function(convolution),
                history=plan.kernel_size - 1,
                residual=plan.residual,
                project_residual=None if projection is None else row_function(projection),
                attention=attention,
                project_in=None if attention is None else row_function(attention.in_projection),
                project_out=None if attention is None else row_function(attention.out_projection),
            )
            for plan, projection, convolution, attention in zip(
                decoder.plans, decoder.projections, decoder.convolutions, decoder.attention)
        ]
        return LayerFunctions(row_function(decoder.fc1), blocks, row_function(decoder.fc2), row_function(decoder.fc3))

    def history_widths(self) -> List[int]:
        """Each block's history width, (k - 1) · in_channels (0: a block with k = 1 keeps none)."""
        return [(plan.kernel_size - 1) * plan.in_channels for plan in self.decoder.plans]

    def backend_for(self, encoder_out) -> "backend.Backend":
        """The forms a search of this decoder over ``encoder_out`` runs (``backend.select``, once per search):
        by the encoder output's device and dtype, and whether the decoder's layers are int8."""
        keys = encoder_out["encoder_out"][0]
        return backend.select(keys.device, keys.dtype, int8_weights=int8_layers.has_int8_weights(self.decoder))

    def start(self, encoder_out, chosen: Optional["backend.Backend"] = None) -> DecodingState:
        """The decoding state of a search; ``chosen``: the search's backend (``backend_for``, asked here if not given)."""
        decoder = self.decoder
        if decoder.training:
            raise FConvError("the decoder is in training mode (dropout on); call model.eval() before generating")
        layers = self.layers()
        keys = encoder_out["encoder_out"][0]
        rows = keys.size(0) if encoder_out.get("rows") is None else encoder_out["rows"].numel()
        source = decoder.attention_source(encoder_out, incremental=True) if decoder.num_attention_layers else None
        histories = [keys.new_zeros(rows, width) if width else None for width in self.history_widths()]
        compiled = None
        if self.compiled:
            chosen = chosen or self.backend_for(encoder_out)
            if chosen.step is not None:
                compiled = compiled_step.compiled_decoding(chosen, decoder, layers, histories, source)
        return DecodingState(layers, source, None if compiled is not None else histories, compiled)

    def log_probs(self, state: DecodingState, tokens: Tensor, attention: bool) -> Tuple[Tensor, Optional[Tensor]]:
        """log p(y_{i+1} | y_1..y_i, x) for every row of ``tokens`` (rows x i, the prefix so
        far) and, when ``attention``, the attention averaged over the layers (rows x src)."""
        # prefixes hold no padding: position i of each (make_positions' numbering)
        return self.step(state, tokens[:, -1], self.decoder.padding_idx + tokens.size(1), attention)

    def step(self, state: DecodingState, last: Tensor, position: Union[int, Tensor],
             attention: bool) -> Tuple[Tensor, Optional[Tensor]]:
        """``log_probs`` from the newest tokens (rows) at their position number (as
        ``make_positions`` numbers it: padding_idx + the prefix's length), an int or, in an
        exported graph, a 0-dim tensor."""
        decoder, layers = self.decoder, state.layers
        if state.compiled is not None:
            return state.compiled.log_probs(last, position, attention)
        x = decoder.embed_tokens(last)
        if decoder.embed_positions is not None:
            positions = position.expand_as(last) if torch.is_tensor(position) else torch.full_like(last, position)
            x = x + decoder.embed_positions.at(positions)
        target_embedding = x
        x = layers.fc1(x)
        block_outputs = [x]
        attention_weights: List[Tensor] = []
        for index, block in enumerate(layers.blocks):
            residual = None
            if block.residual:
                residual = block_outputs[-block.residual]
                if block.project_residual is not None:
                    residual = block.project_residual(residual)
            window = x
            if block.history:
                window = torch.cat([state.histories[index], x], dim=1)
                state.histories[index] = window[:, x.size(1):]
            x = decoder.gate(block.convolve(window))
            if block.attention is not None:
                x, weights = block.attention.attend(x, target_embedding, state.source, block.project_in, block.project_out)
                attention_weights.append(weights)
            x = add_residual(x, residual)
            block_outputs.append(x)
        output_state = layers.fc2(x)
        logits = layers.fc3(output_state)
        copying = decoder.pointer_generator
        average = None
        if attention_weights and (attention or copying is not None):
            average = sum(attention_weights) / decoder.num_attention_layers
        if copying is None:
            lprobs = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # fairseq's get_normalized_probs
        else:  # one target position: batch x 1 x ... as the decoder's forward has them
            context = copying.context(state.source, average)
            lprobs = copying(logits.unsqueeze(1), output_state.unsqueeze(1), context, target_embedding.unsqueeze(1),
                             average, state.source.tokens_per_row())[:, 0]
        return lprobs, (average[:, 0] if attention and average is not None else None)

    @staticmethod
    def compiled_decoding(state: DecodingState):
        """decoder_step.cpp's ``Decoding`` holding this search's state, where the step runs
        compiled: its ``reorder(order)`` and ``log_probs(last_tokens, position, attention)``
        are ``reorder`` and ``log_probs`` for the newest tokens at a position (as
        ``make_positions`` numbers them), for a caller that runs the steps itself. Else None."""
        return state.compiled

    @staticmethod
    def reorder(state: DecodingState, order: Tensor) -> DecodingState:
        """Row r of the new state is row ``order[r]`` of the old (beam search's choice)."""
        _reorder_histories(state, order)
        if state.source is not None:
            state.source = attention_rows.reordered(state.source, order)
            _give_source(state)
        return state

    @staticmethod
    def reorder_within_sentences(state: DecodingState, order: Tensor, kept_sentences: Optional[Tensor]) -> DecodingState:
        """``reorder`` for an ``order`` that moves each row only among its own sentence's
        rows, as beam search's does, with ``kept_sentences`` the sentences still decoding
        (indices among the previous ones; None: all of them). A source held once per
        sentence then follows the sentences kept without reading ``order``: unchanged at most
        steps, where ``reorder`` checks the order's sentences, a few small operations."""
        source = state.source
        rows = order.numel()
        if source is None or source.copies == 1 or (
                kept_sentences is None and source.keys.size(0) * source.copies != rows) or (
                kept_sentences is not None and kept_sentences.numel() * source.copies != rows):
            return DecoderSteps.reorder(state, order)  # one source row per decoder row, or not the search's rows
        _reorder_histories(state, order)
        if kept_sentences is not None:
            state.source = attention_rows.for_sentences(source, kept_sentences)
            _give_source(state)
        return state


def _reorder_histories(state: DecodingState, order: Tensor) -> None:
    """Row r of each history becomes row ``order[r]``: in the compiled decoding, or here."""
    if state.compiled is not None:
        state.compiled.reorder(order)
    else:
        state.histories = [None if h is None else h.index_select(0, order) for h in state.histories]


def _give_source(state: DecodingState) -> None:
    """The compiled decoding's copy of the attention source, after it changed."""
    if state.compiled is not None:
        compiled_step.give_source(state.compiled, state.source)
