"""Splits written by fairseq's own mmap builder pass; each kind of damage names its file."""

import numpy as np
import pytest
import torch
from fairseq.data import indexed_dataset

from fconv_plugin.compat.data_bin_checks import check_mmap_split
from fconv_plugin.errors import FConvError
from tests.support import make_dictionary

SENTENCES = [[4, 5, 6, 2], [7, 2], [8, 9, 10, 11, 12, 2], [2]]


@pytest.fixture
def split(tmp_path):
    """A split of SENTENCES written by fairseq-preprocess's builder; returns its prefix."""
    prefix = str(tmp_path / "test.de-en.de")
    dictionary = make_dictionary(10)  # 4 special symbols + 10 words: ids 0..13
    builder = indexed_dataset.make_builder(indexed_dataset.data_file_path(prefix), "mmap", vocab_size=len(dictionary))
    for sentence in SENTENCES:
        builder.add_item(torch.tensor(sentence))
    builder.finalize(indexed_dataset.index_file_path(prefix))
    return prefix, dictionary


def _rewrite(path, change):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    with open(path, "wb") as f:
        f.write(change(data))


def test_a_whole_split_passes_and_reads_back(split):
    prefix, dictionary = split
    check_mmap_split(prefix, dictionary)
    dataset = indexed_dataset.MMapIndexedDataset(prefix)
    assert [dataset[i].tolist() for i in range(len(dataset))] == SENTENCES


@pytest.mark.parametrize("suffix, change, problem", [
    (".bin", lambda d: d[:-2], "is truncated: 24 bytes for the 13 tokens"),
    (".bin", lambda d: d + b"\x00\x00", "is longer than its index says: 28 bytes for the 13 tokens"),
    (".idx", lambda d: d[:20], "is truncated (20 bytes, shorter than an index header)"),
    # a 26-byte header, then 4 bytes of size and 8 of pointer per sentence
    (".idx", lambda d: d[:-8], "has 66 bytes but its header promises 4 sentences (74 bytes)"),
    (".idx", lambda d: b"TNTIDX\x00\x00\x00" + d[9:], "is not a fairseq mmap index"),
    (".idx", lambda d: d[:9] + (2).to_bytes(8, "little") + d[17:], "is not a fairseq mmap index"),
    # the second sentence's size (4 -> 5 tokens) no longer matches the pointers
    (".idx", lambda d: d[:26 + 4] + (5).to_bytes(4, "little") + d[26 + 8:], "has sentence sizes and pointers that do not agree"),
    (".bin", lambda d: d[:2] + (14).to_bytes(2, "little") + d[4:], "holds token id 14, outside its dictionary of 14"),
])
def test_damage_is_named_with_the_file(split, suffix, change, problem):
    prefix, dictionary = split
    path = prefix + suffix
    _rewrite(path, change)
    with pytest.raises(FConvError) as raised:
        check_mmap_split(prefix, dictionary)
    message = str(raised.value)
    assert message.startswith(f"{path} {problem}"), message
    assert "re-run fairseq-preprocess" in message and "\n" not in message


def test_the_largest_valid_token_id_passes(split):
    prefix, dictionary = split
    _rewrite(prefix + ".bin", lambda d: d[:2] + (len(dictionary) - 1).to_bytes(2, "little") + d[4:])
    check_mmap_split(prefix, dictionary)
    assert np.memmap(prefix + ".bin", dtype=np.uint16, mode="r")[1] == len(dictionary) - 1
