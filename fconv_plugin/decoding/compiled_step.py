"""The decoder's step in its compiled form: ``native/decoder_step.cpp`` over the layers of ``steps.py``.

``DecoderSteps.start`` asks ``backend.select`` which form runs; where it names the compiled
step, ``compiled_decoding`` builds decoder_step.cpp's ``Decoding`` for the search: each layer
function of ``steps.layers()`` as the same call in C++ (a float32 ``addmm``, or the compiled
int8 loops' linear), the embeddings' tables, the histories and the attention source. The
same ATen calls in the same order as ``DecoderSteps.step``, so the same bits
(``tests/decoding/test_steps.py``). A decoder with parts it does not know (a copying model, a
shared output embedding, other embeddings, other forms of the gate or of the attention's
sums) gets None, and the torch form runs.
"""

from typing import List, Optional

import torch
from torch import Tensor

from ..deployment import int8 as int8_layers
from ..models.fconv import FConvDecoder
from ..modules import AttentionSource
from ..modules.attention import AttentionSums
from ..modules.conv_block import GatedLinearUnit
from ..modules.embeddings import LearnedPositionalEmbedding, TokenEmbedding
from ..backend import Backend
from .layer_functions import AddmmRows, LayerFunctions, RowFunction


def _compiled_rows(compiled_step, function: RowFunction):
    """``function`` as decoder_step.cpp's ``Rows``; None where it is neither a float32
    ``addmm`` nor the compiled int8 loops' linear, each with a bias."""
    if isinstance(function, AddmmRows) and function.bias is not None and function.weight_t.dtype == torch.float32:
        return compiled_step.Rows.addmm(function.bias, function.weight_t)
    if isinstance(function, int8_layers.Int8Rows) and function.bias is not None:
        return compiled_step.Rows.int8(function.loops.api, function.weight, function.scale, function.bias,
                                       function.packed, function.compensation)
    return None


def _compiled_step(chosen: Backend, decoder: FConvDecoder, layers: LayerFunctions):
    """native/decoder_step.cpp's ``Step`` over ``layers``; None where the torch step runs: a
    copying model, or parts it does not know."""
    compiled_step = chosen.step
    if decoder.pointer_generator is not None:
        return None
    sums = {type(attention.sums) for attention in decoder.attention if attention is not None}
    if type(decoder.gate) is GatedLinearUnit and sums <= {AttentionSums}:
        int8_api = None  # torch's float32 glu, bmm and softmax
    elif (type(decoder.gate) is int8_layers.PreciseGatedLinearUnit and sums <= {int8_layers.BatchInvariantSums}
          and chosen.int8 is not None):
        int8_api = chosen.int8.api  # their float64 forms, as the int8 loops compute them
    else:
        return None
    ends = [_compiled_rows(compiled_step, f) for f in (layers.fc1, layers.fc2, layers.fc3)]
    if None in ends:
        return None
    blocks = []
    for block in layers.blocks:
        functions = (block.convolve, block.project_residual, block.project_in, block.project_out)
        compiled = [None if f is None else _compiled_rows(compiled_step, f) for f in functions]
        if any(c is None and f is not None for c, f in zip(compiled, functions)):
            return None
        blocks.append(compiled_step.Block(compiled[0], block.history, block.residual, *compiled[1:]))
    return compiled_step.Step(ends[0], blocks, ends[1], ends[2], int8_api)


def _compiled_table(chosen: Backend, embedding):
    """An embedding as decoder_step.cpp's ``Table``: a float32 table or an int8 one with the
    compiled loops; None for any other."""
    compiled_step = chosen.step
    if isinstance(embedding, int8_layers.Int8Embedding) and chosen.int8 is not None:
        return compiled_step.Table.int8(chosen.int8.api, embedding.int8.weight, embedding.int8.scale)
    if type(embedding) in (TokenEmbedding, LearnedPositionalEmbedding) and embedding.weight.dtype == torch.float32:
        return compiled_step.Table.float32(embedding.weight)
    return None


def compiled_decoding(chosen: Backend, decoder: FConvDecoder, layers: LayerFunctions, histories: List[Optional[Tensor]],
                      source: Optional[AttentionSource]):
    """decoder_step.cpp's ``Decoding`` of a search (its ``Step``, the embeddings, the state),
    with the modules ``chosen`` (``backend.select``); None where the torch step runs
    (``_compiled_step``, or embeddings it does not know)."""
    step = _compiled_step(chosen, decoder, layers)
    if step is None:
        return None
    tokens = _compiled_table(chosen, decoder.embed_tokens)
    positions = None if decoder.embed_positions is None else _compiled_table(chosen, decoder.embed_positions)
    if tokens is None or (positions is None and decoder.embed_positions is not None):
        return None
    decoding = chosen.step.Decoding(step, tokens, positions, histories)
    give_source(decoding, source)
    return decoding


def give_source(decoding, source: Optional[AttentionSource]) -> None:
    """The compiled ``decoding``'s copy of the attention source (after it changed)."""
    if source is None:
        decoding.set_source(None, None, None, None, 0.0, 1)
        return
    scale = source.length_scale
    decoding.set_source(source.keys, source.values, source.padding_mask,
                        scale if torch.is_tensor(scale) else None, scale if isinstance(scale, float) else 0.0,
                        source.copies)
