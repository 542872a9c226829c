"""The decoder one target position at a time, its state held in plain tensors (§3.2-3.3).

fairseq's incremental decoding hands the decoder the whole target prefix at every step,
keeps each convolution's last k - 1 inputs in a dictionary keyed per module, recounts the
positions from the prefix, and runs every layer as a module call on batch x 1 x channel
tensors. ``DecoderSteps`` runs the same arithmetic for the inference core's beam search
with less around it: the newest tokens and their position number in, each block's input
history a tensor in a list, and each layer a function of a matrix of rows (the layer's
``row_function``, float32 or int8) looked up once per search. The operations are the
decoder's own, in its order, so the log-probabilities are its bits
(``tests/models/test_decoder_steps.py``); fairseq-generate and fairseq-interactive keep
the decoder's ``forward``.
"""

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ..errors import FConvError
from ..modules import AttentionLayer, AttentionSource
from ..modules.conv_block import add_residual
from .fconv import FConvDecoder

RowFunction = Callable[[Tensor], Tensor]


def row_function(layer) -> RowFunction:
    """``layer`` as a function of a matrix of rows: its own ``row_function`` where it has one
    (weight-normalised and int8 layers), else the layer itself (a shared output embedding's
    ``nn.Linear``)."""
    return layer.row_function() if hasattr(layer, "row_function") else layer


@dataclass
class _Block:
    """One convolution block's functions (§3.2), with its attention (§3.3) where it has one."""

    convolve: RowFunction  # flattened windows (rows x k·in) to rows x 2·out
    history: int  # k - 1 inputs kept between steps
    residual: int  # blocks back (0: none)
    project_residual: Optional[RowFunction]
    attention: Optional[AttentionLayer]
    project_in: Optional[RowFunction]
    project_out: Optional[RowFunction]


@dataclass
class _Layers:
    """The decoder's layers as functions, looked up once per search (the weights as they are then)."""

    fc1: RowFunction
    blocks: List[_Block]
    fc2: RowFunction
    fc3: RowFunction


@dataclass
class DecodingState:
    """What a step reads besides the newest tokens, one row per hypothesis; one per search,
    so searches in several threads share nothing but the model."""

    layers: _Layers
    source: Optional[AttentionSource]  # the encoder outputs, once per sentence where shared
    histories: List[Optional[Tensor]]  # block l's last k - 1 inputs, rows x (k - 1)·in, oldest first


class DecoderSteps:
    """Incremental decoding of an ``FConvDecoder`` with explicit state, for beam search.

    ``start`` prepares a search (the layers' functions, the attention source shared across
    each sentence's ``decoder.beam_size`` hypotheses, zero histories), ``log_probs`` decodes
    one position for every hypothesis, ``reorder`` follows the beams."""

    def __init__(self, model):
        self.decoder: FConvDecoder = model.decoder

    @staticmethod
    def supports(model) -> bool:
        return isinstance(getattr(model, "decoder", None), FConvDecoder)

    def start(self, encoder_out) -> DecodingState:
        decoder = self.decoder
        if decoder.training:
            raise FConvError("the decoder is in training mode (dropout on); call model.eval() before generating")
        blocks = [
            _Block(
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
        layers = _Layers(row_function(decoder.fc1), blocks, row_function(decoder.fc2), row_function(decoder.fc3))
        keys = encoder_out["encoder_out"][0]
        rows = keys.size(0) if encoder_out.get("rows") is None else encoder_out["rows"].numel()
        source = decoder.attention_source(encoder_out, incremental=True) if decoder.num_attention_layers else None
        histories = [
            keys.new_zeros(rows, block.history * plan.in_channels) if block.history else None
            for block, plan in zip(blocks, decoder.plans)
        ]
        return DecodingState(layers, source, histories)

    def log_probs(self, state: DecodingState, tokens: Tensor, attention: bool) -> Tuple[Tensor, Optional[Tensor]]:
        """log p(y_{i+1} | y_1..y_i, x) for every row of ``tokens`` (rows x i, the prefix so
        far) and, when ``attention``, the attention averaged over the layers (rows x src)."""
        decoder, layers = self.decoder, state.layers
        last = tokens[:, -1]
        x = decoder.embed_tokens(last)
        if decoder.embed_positions is not None:  # prefixes hold no padding: position i of each
            x = x + decoder.embed_positions.at(torch.full_like(last, decoder.padding_idx + tokens.size(1)))
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
    def reorder(state: DecodingState, order: Tensor) -> DecodingState:
        """Row r of the new state is row ``order[r]`` of the old (beam search's choice)."""
        state.histories = [None if h is None else h.index_select(0, order) for h in state.histories]
        if state.source is not None:
            state.source = state.source.index_select(order)
        return state
