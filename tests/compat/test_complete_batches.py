"""fairseq's batch_by_size with the plugin's fix: every index batched once, within the limits.

The reference is the definition of a batching: each index in exactly one batch, in the
order given, no batch over --batch-size or --max-tokens (padded size), and fairseq's own
batches kept as they were where it kept them.
"""

import logging

import numpy as np
import pytest
from fairseq.data import data_utils

from fconv_plugin.compat import complete_batches

MULTIPLE = 8  # fairseq's default --required-batch-size-multiple


def _unpatched_batch_by_size():
    function = data_utils.batch_by_size
    assert "complete_batches" in getattr(function, "_fconv_plugin_patches", ())  # tests/conftest.py installed it
    return function.__wrapped__


def _check_batching(batches, indices, lengths, max_sentences=None, max_tokens=None):
    flat = np.concatenate(batches)
    np.testing.assert_array_equal(flat, indices)  # each index once, in order
    for batch in batches:
        assert len(batch) > 0
        if max_sentences:
            assert len(batch) <= max_sentences
        if max_tokens:
            assert len(batch) * lengths[batch].max() <= max_tokens


@pytest.mark.parametrize("size", [100, 60, 7, 1, 9])
@pytest.mark.parametrize("batch_size", [1, 7, 32, 33])
def test_every_sentence_is_batched_for_any_batch_size(size, batch_size):
    indices = np.arange(size, dtype=np.int64)
    lengths = np.full(size, 10, dtype=np.int64)
    batches = data_utils.batch_by_size(indices, lambda i: 10, num_tokens_vec=lengths, max_sentences=batch_size,
                                       required_batch_size_multiple=MULTIPLE)
    _check_batching(batches, indices, lengths, max_sentences=batch_size)


def test_fairseq_alone_drops_the_last_batch_and_the_fix_keeps_its_batches():
    indices = np.arange(100, dtype=np.int64)
    lengths = np.full(100, 10, dtype=np.int64)
    fairseq_batches = _unpatched_batch_by_size()(indices, None, lengths, None, 32, MULTIPLE, None)
    assert sum(len(b) for b in fairseq_batches) == 96  # the host's bug, as the issue saw it
    fixed = data_utils.batch_by_size(indices, None, num_tokens_vec=lengths, max_sentences=32,
                                     required_batch_size_multiple=MULTIPLE)
    assert [list(b) for b in fixed[:3]] == [list(b) for b in fairseq_batches]
    assert list(fixed[3]) == [96, 97, 98, 99]


@pytest.mark.parametrize("seed", range(6))
def test_max_tokens_batching_over_sentences_of_mixed_lengths(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(20, 300))
    lengths = rng.integers(1, 60, size=size).astype(np.int64)
    indices = np.argsort(lengths, kind="stable").astype(np.int64)  # as ordered_indices sorts by length
    for max_tokens in (60, 200, 777, 4000):
        for through_function in (False, True):  # fairseq's two code paths: sizes as a vector or a function
            vector = None if through_function else lengths[indices]
            batches = data_utils.batch_by_size(indices, lambda i: int(lengths[i]), num_tokens_vec=vector,
                                               max_tokens=max_tokens, required_batch_size_multiple=MULTIPLE)
            _check_batching(batches, indices, lengths, max_tokens=max_tokens)


def test_a_multiple_of_one_and_fixed_shapes_are_fairseqs_own():
    indices = np.arange(50, dtype=np.int64)
    lengths = np.full(50, 5, dtype=np.int64)
    original = _unpatched_batch_by_size()
    expected = original(indices, None, lengths, None, 16, 1, None)
    actual = data_utils.batch_by_size(indices, None, num_tokens_vec=lengths, max_sentences=16)
    assert [list(b) for b in actual] == [list(b) for b in expected]
    shapes = [(8, 5), (4, 5)]
    expected = original(indices, lambda i: 5, None, None, None, 1, shapes)
    actual = data_utils.batch_by_size(indices, lambda i: 5, fixed_shapes=shapes)
    assert [list(b) for b in actual] == [list(b) for b in expected]


def test_the_log_names_the_subset_and_the_count_once(caplog, monkeypatch):
    monkeypatch.setattr(complete_batches, "_subsets_reported", set())
    indices = np.arange(60, dtype=np.int64)
    lengths = np.full(60, 4, dtype=np.int64)
    token = complete_batches._subset_being_batched.set("valid")
    try:
        with caplog.at_level(logging.INFO, logger=complete_batches.__name__):
            for _ in range(3):
                data_utils.batch_by_size(indices, None, num_tokens_vec=lengths, max_sentences=32,
                                         required_batch_size_multiple=MULTIPLE)
    finally:
        complete_batches._subset_being_batched.reset(token)
    kept = _unpatched_batch_by_size()(indices, None, lengths, None, 32, MULTIPLE, None)
    assert [len(b) for b in kept] == [32, 24]  # fairseq keeps 56: the last batch, of 4, is dropped
    lines = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert lines == ["fconv_plugin: fairseq's batching left out 4 of the 60 sentences of the valid subset (a last "
                     "batch that is not a multiple of --required-batch-size-multiple 8, fairseq #5036); they are "
                     "batched too"]


def test_indices_given_as_a_list_or_an_iterator():
    lengths = np.full(20, 3, dtype=np.int64)
    for given in (list(range(20)), iter(range(20))):
        batches = data_utils.batch_by_size(given, lambda i: 3, num_tokens_vec=lengths, max_sentences=16,
                                           required_batch_size_multiple=MULTIPLE)
        _check_batching(batches, np.arange(20), lengths, max_sentences=16)
