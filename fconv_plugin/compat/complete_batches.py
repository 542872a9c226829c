"""Every sentence batched: fairseq 0.12 loses the last batch of a subset (fairseq #5036, #5351).

``fairseq.data.data_utils.batch_by_size`` drops the last batch whenever its size is not a
multiple of ``--required-batch-size-multiple`` (8 by default). ``fairseq-generate`` then
translates 96 of 100 sentences with ``--batch-size 32`` and says nothing, and the same
happens to ``fairseq-validate``, validation during ``fairseq-train`` and the training
subset itself (its longest sentences, as batches are cut from indices ordered by length).
Here the sentences it leaves out are batched too, as fairseq batches them with a
multiple of 1, so each subset is used whole; the first time this happens to a subset the
log says how many sentences that was.
"""

import contextvars
import functools
import logging

import numpy as np
from fairseq.data import data_utils
from fairseq.tasks import FairseqTask

from ._patching import patch

logger = logging.getLogger(__name__)

_subset_being_batched = contextvars.ContextVar("fconv_plugin_subset_being_batched", default=None)
_subsets_reported = set()


def left_out(indices: np.ndarray, batches) -> np.ndarray:
    """The positions in ``indices`` that no batch holds, in their order."""
    if not batches:
        return np.arange(len(indices))
    return np.flatnonzero(~np.isin(indices, np.concatenate([np.asarray(b) for b in batches])))


def _report(count: int, total: int, multiple: int) -> None:
    subset = _subset_being_batched.get() or "a"
    if subset in _subsets_reported:
        return
    _subsets_reported.add(subset)
    logger.info(
        "fconv_plugin: fairseq's batching left out %d of the %d sentences of the %s subset (a last batch that is "
        "not a multiple of --required-batch-size-multiple %d, fairseq #5036); they are batched too",
        count, total, subset, multiple,
    )


def _complete(batch_by_size):
    @functools.wraps(batch_by_size)  # __wrapped__: fairseq's own, for tests
    def batch_every_sentence(indices, num_tokens_fn, num_tokens_vec=None, max_tokens=None, max_sentences=None,
                             required_batch_size_multiple=1, fixed_shapes=None):
        if not isinstance(indices, np.ndarray):  # as fairseq takes them; an iterator is read once
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        batches = batch_by_size(indices, num_tokens_fn, num_tokens_vec, max_tokens, max_sentences,
                                required_batch_size_multiple, fixed_shapes)
        if fixed_shapes is not None:  # fairseq's fixed shapes choose what fits; not this bug
            return batches
        missing = left_out(indices, batches)
        if len(missing) == 0:
            return batches
        _report(len(missing), len(indices), required_batch_size_multiple)
        tokens = None if num_tokens_vec is None else np.asarray(num_tokens_vec)[missing]
        rest = batch_by_size(indices[missing], num_tokens_fn, tokens, max_tokens, max_sentences, 1, None)
        return list(batches) + list(rest)

    return batch_every_sentence


def _naming_the_subset(get_batch_iterator):
    def get_batch_iterator_naming_the_subset(self, dataset, *args, **kwargs):
        datasets = getattr(self, "datasets", None) or {}
        name = next((split for split, candidate in datasets.items() if candidate is dataset), None)
        token = _subset_being_batched.set(name)
        try:
            return get_batch_iterator(self, dataset, *args, **kwargs)
        finally:
            _subset_being_batched.reset(token)

    return get_batch_iterator_naming_the_subset


def install() -> None:
    patch(data_utils, "batch_by_size", "complete_batches", _complete)
    patch(FairseqTask, "get_batch_iterator", "complete_batches", _naming_the_subset)
