"""The attention source (``modules.attention.AttentionSource``) following beam search's rows.

In beam search every sentence's encoder outputs are repeated once per hypothesis. A
source can hold them once per sentence instead (``copies`` > 1; the idea of fairseq's
BeamableMM): the queries of a sentence's hypotheses then go through one matrix product
against one copy of its keys and values (§3.3 computes the same sums either way), and
reordering the beams moves nothing unless whole sentences leave the batch. The
functions here lay a source out for the decoder's rows and follow the search's
reorderings; the decoder (``fconv.py``) and its explicit-state steps
(``decoding/steps.py``) call them.
"""

import torch
from torch import Tensor

from ..modules.attention import AttentionSource


def shared_across(source: AttentionSource, copies: int) -> AttentionSource:
    """One row per sentence if every run of ``copies`` rows holds one sentence's copies.

    Checked on keys, values and mask (once per batch, comparing in place), so a wrong
    beam size only costs the sharing, never the result.
    """
    rows = source.keys.size(0)
    if copies <= 1 or source.copies != 1 or rows % copies != 0:
        return source
    shared = rows_of(source, torch.arange(0, rows, copies, device=source.keys.device), copies)
    for one_copy, every_copy in (
        (shared.keys, source.keys), (shared.values, source.values),
        (shared.padding_mask, source.padding_mask), (shared.tokens, source.tokens),
    ):
        if every_copy is None:
            continue
        runs = every_copy.reshape(-1, copies, *every_copy.shape[1:])
        if not torch.equal(one_copy.unsqueeze(1).expand_as(runs), runs):
            return source
    return shared


def for_rows(source: AttentionSource, rows: Tensor, copies: int) -> AttentionSource:
    """The source for decoder rows ``rows`` (indices into the source's rows), held once per
    sentence when every run of ``copies`` rows reads one row, as beam search's do."""
    if copies > 1 and rows.numel() % copies == 0:
        runs = rows.view(-1, copies)
        if bool(runs.eq(runs[:, :1]).all()):
            return rows_of(source, runs[:, 0], copies)
    return rows_of(source, rows, 1)


def reordered(source: AttentionSource, order: Tensor) -> AttentionSource:
    """The source for decoder rows ``order`` (beam search's reordering)."""
    if source.copies == 1:
        return rows_of(source, order, 1)
    if order.numel() % source.copies == 0:
        sentences = order.view(-1, source.copies).div(source.copies, rounding_mode="floor")
        if bool(sentences.eq(sentences[:, :1]).all()):  # each hypothesis stays with its sentence
            kept = sentences[:, 0]
            unchanged = torch.arange(source.keys.size(0), device=kept.device)
            if kept.numel() == unchanged.numel() and bool(kept.eq(unchanged).all()):
                return source  # the same sentences: nothing to move
            return rows_of(source, kept, source.copies)
    # rows moved between sentences: one row per decoder row again
    return rows_of(source, order.div(source.copies, rounding_mode="floor"), 1)


def for_sentences(source: AttentionSource, kept: Tensor) -> AttentionSource:
    """The source of the sentences ``kept`` (indices of the source's rows), each held for as
    many decoder rows as before."""
    return rows_of(source, kept, source.copies)


def rows_of(source: AttentionSource, order: Tensor, copies: int) -> AttentionSource:
    """Rows ``order`` of every part of the source, each held for ``copies`` decoder rows."""
    return AttentionSource(
        keys=source.keys.index_select(0, order),
        values=source.values.index_select(0, order),
        padding_mask=None if source.padding_mask is None else source.padding_mask.index_select(0, order),
        length_scale=source.length_scale
        if isinstance(source.length_scale, float)
        else source.length_scale.index_select(0, order),
        copies=copies,
        tokens=None if source.tokens is None else source.tokens.index_select(0, order),
    )
