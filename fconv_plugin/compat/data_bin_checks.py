"""A damaged data-bin gets one line that names the file, not a traceback deep in numpy.

fairseq reads a binarised split (``train.de-en.de.idx`` + ``.bin``) lazily. A truncated
``.bin`` fails only when a batch reaches the missing sentences, a truncated ``.idx``
fails inside numpy, a file that is not an index fails on an ``assert``, and the
half-built dataset's ``__del__`` adds a second traceback. A ``.bin`` written with
another dictionary trains on the wrong words, or fails in the embedding with
"index out of range".

Each split in fairseq's default format (``mmap``) is now checked before fairseq opens
it: the index parses and has the length its header says, its pointers are the running
sum of its sizes, the ``.bin`` holds exactly the tokens the index points to, and every
token id is in the dictionary. A split in another format must at least start with that
format's magic bytes.
"""

import os
import struct

import numpy as np
from fairseq.data import indexed_dataset

from ..errors import FConvError
from ._patching import patch

MMAP_MAGIC = b"MMIDIDX\x00\x00"
LEGACY_MAGIC = b"TNTIDX\x00\x00"
_HEADER = struct.Struct("<9sQBQ")  # magic, version, dtype code, number of sentences


def _damaged(path: str, problem: str) -> FConvError:
    return FConvError(f"{path} {problem}; the data-bin is damaged or mixed from different runs: "
                      "re-run fairseq-preprocess to rebuild it")


def check_mmap_split(prefix: str, dictionary=None) -> None:
    """Raise ``FConvError`` unless ``prefix``.idx/.bin form a whole split of ``dictionary``."""
    index_path = indexed_dataset.index_file_path(prefix)
    data_path = indexed_dataset.data_file_path(prefix)
    with open(index_path, "rb") as stream:
        header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise _damaged(index_path, f"is truncated ({len(header)} bytes, shorter than an index header)")
    magic, version, dtype_code, count = _HEADER.unpack(header)
    if magic != MMAP_MAGIC or version != 1 or dtype_code not in indexed_dataset._code_to_dtype:
        raise _damaged(index_path, "is not a fairseq mmap index (wrong magic bytes, version or token type)")
    expected_index_bytes = _HEADER.size + count * (4 + 8)  # int32 sizes, then int64 pointers
    index_bytes = os.path.getsize(index_path)
    if index_bytes != expected_index_bytes:
        raise _damaged(index_path, f"has {index_bytes} bytes but its header promises "
                                   f"{count} sentences ({expected_index_bytes} bytes)")
    index = np.memmap(index_path, mode="r", offset=_HEADER.size, dtype=np.uint8)
    sizes = index[: count * 4].view(np.int32)
    pointers = index[count * 4:].view(np.int64)
    dtype = np.dtype(indexed_dataset._code_to_dtype[dtype_code])
    token_offsets = np.concatenate(([0], np.cumsum(sizes[:-1], dtype=np.int64))) if count else np.zeros(0, np.int64)
    if (sizes < 0).any() or not np.array_equal(pointers, token_offsets * dtype.itemsize):
        raise _damaged(index_path, "has sentence sizes and pointers that do not agree")
    total_tokens = int(sizes.sum(dtype=np.int64))
    data_bytes = os.path.getsize(data_path)
    if data_bytes != total_tokens * dtype.itemsize:
        state = "is truncated" if data_bytes < total_tokens * dtype.itemsize else "is longer than its index says"
        raise _damaged(data_path, f"{state}: {data_bytes} bytes for the {total_tokens} tokens of {index_path}")
    if dictionary is not None and total_tokens:
        largest = int(np.memmap(data_path, mode="r", dtype=dtype).max())
        if largest >= len(dictionary):
            raise _damaged(data_path, f"holds token id {largest}, outside its dictionary of {len(dictionary)} symbols")


def _checked_make_dataset(original):
    def make_dataset(path, impl, fix_lua_indexing=False, dictionary=None):
        index_path = indexed_dataset.index_file_path(path)
        if impl != "raw" and os.path.exists(index_path) and os.path.exists(indexed_dataset.data_file_path(path)):
            with open(index_path, "rb") as stream:
                magic = stream.read(len(MMAP_MAGIC))
            if impl == "mmap" or magic == MMAP_MAGIC:
                check_mmap_split(path, dictionary)
            elif not magic.startswith(LEGACY_MAGIC):
                raise _damaged(index_path, "is not a fairseq index (it starts with none of fairseq's magic bytes)")
        return original(path, impl, fix_lua_indexing, dictionary)

    return make_dataset


def install() -> None:
    patch(indexed_dataset, "make_dataset", "data_bin_checks", _checked_make_dataset)
