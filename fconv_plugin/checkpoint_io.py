"""Reading checkpoints safely and writing files whole: the one place for both.

Reading. torch >= 2.6 loads with ``weights_only=True`` and refuses any pickled global
it does not know, and every fairseq checkpoint stores its options as an
``argparse.Namespace``. Rather than switching the safe loader off, exactly the types
fairseq checkpoints contain are allowed, and only while a load runs (torch's
``safe_globals`` context; the process-wide allowlist is left alone). Anything else is
still refused, before any of it runs, and reported (like truncated or corrupt files)
in one line.

Writing. A file is written to a temporary file in its own directory and renamed over
its destination (``os.replace``), so a reader sees the old file or the whole new one,
never a part; a directory is built beside its destination and renamed. New files get
the mode ``open(path, "w")`` would give them, not ``mkstemp``'s private 0600.

The model (``FConvModel.from_pretrained``), the inference core, the host fixes
(``compat.safe_loading``, ``compat.atomic_checkpoints``) and the commands all call this
module; it imports nothing of the plugin but its error type.
"""

import argparse
import contextlib
import glob
import os
import re
import shutil
import tempfile
import traceback
from typing import Callable, Iterator

import numpy
import torch

from .errors import FConvError


def _numpy_types() -> list:
    """What numpy values in ``extra_state`` pickle as: scalars (e.g. a validation loss)
    and arrays of numbers (e.g. the n-gram counts ``--eval-bleu`` keeps in its metrics)."""
    multiarray = getattr(numpy, "_core", getattr(numpy, "core", None)).multiarray
    dtype_classes = [
        type(numpy.dtype(name)) for name in ("float64", "float32", "int64", "int32", "bool")
    ]
    return [multiarray.scalar, multiarray._reconstruct, numpy.ndarray, numpy.dtype, *dtype_classes]


FAIRSEQ_CHECKPOINT_TYPES = [argparse.Namespace, *_numpy_types()]

_UNSUPPORTED_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


# --- reading ---------------------------------------------------------------------------


@contextlib.contextmanager
def loading_fairseq_checkpoints(path: str = "the checkpoint"):
    """Within: torch's safe unpickler also accepts fairseq's checkpoint types, and a
    load that fails inside torch raises a one-line FConvError naming ``path``."""
    try:
        with torch.serialization.safe_globals(FAIRSEQ_CHECKPOINT_TYPES):
            yield
    except (FileNotFoundError, IsADirectoryError, PermissionError, FConvError):
        raise
    except Exception as e:
        # garbage makes the unpickler fail in many ways (IndexError, KeyError, ...)
        if _raised_inside_torch_load(e):
            raise explain_load_failure(path, e) from None
        raise


def read_checkpoint_file(path: str) -> dict:
    """A fairseq checkpoint file as saved (no upgrade of its options), loaded safely on CPU."""
    if not os.path.isfile(path):
        raise FConvError(f"{path}: no such checkpoint file")
    with loading_fairseq_checkpoints(path):
        return torch.load(path, map_location="cpu")


def explain_load_failure(path: str, error: BaseException) -> FConvError:
    """A one-line explanation of why ``path`` could not be loaded."""
    message = str(error)
    found = _UNSUPPORTED_GLOBAL.search(message)
    if "Weights only load failed" in message and found:
        what = found.group(1)
        return FConvError(
            f"refused to load checkpoint {path}: it pickles {what}, which fairseq checkpoints never contain, "
            "so nothing in it was run; load checkpoints only from sources you trust"
        )
    return FConvError(
        f"checkpoint {path} is truncated or corrupt ({type(error).__name__}: {_first_line(message)}); "
        "copy it again or load another checkpoint, e.g. checkpoint_best.pt"
    )


def explain_unreadable_contents(path: str, error: BaseException) -> FConvError:
    """A one-line explanation for a file that unpickled but is no checkpoint fairseq can read."""
    return FConvError(
        f"checkpoint {path} is corrupt or not a fairseq checkpoint: fairseq could not read what it holds "
        f"({type(error).__name__}: {_first_line(str(error))}); copy it again or load "
        "another checkpoint, and pass --user-dir for a model a plugin defines"
    )


def _raised_inside_torch_load(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return any(os.path.join("torch", "serialization.py") in frame.filename for frame in frames)


def _first_line(message: str) -> str:
    lines = [line for line in message.splitlines() if line.strip() and "Weights only load failed" not in line]
    return lines[0].strip()[:200] if lines else "no detail"


# --- writing ---------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: 0666 less this process's umask."""
    return 0o666 & ~_umask()


def temporary_files_of(path: str) -> list:
    """Temporary files ``write_atomically`` left for ``path`` when its process was killed."""
    directory = os.path.dirname(os.path.abspath(path))
    prefix = os.path.basename(path) + "."
    return glob.glob(os.path.join(glob.escape(directory), glob.escape(prefix) + "*.tmp"))


def write_atomically(path: str, write: Callable, binary: bool = True) -> None:
    """Call ``write(f)`` on a temporary file beside ``path``, then rename it to ``path``.

    ``path`` is always whole: the old file until the rename, then the new one. A write
    that fails removes its temporary file; a killed one's is removed by the next write
    to the same path."""
    for stale in temporary_files_of(path):
        os.remove(stale)
    directory = os.path.dirname(os.path.abspath(path))
    handle, tmp_path = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_path, new_file_mode())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def copy_atomically(src_path: str, dst_path: str) -> bool:
    """Copy ``src_path`` to ``dst_path`` so that ``dst_path`` is always whole."""
    with open(src_path, "rb") as src:
        write_atomically(dst_path, lambda tmp: shutil.copyfileobj(src, tmp, length=16 * 1024 * 1024))
    return True


@contextlib.contextmanager
def directory_atomically(path: str) -> Iterator[str]:
    """Yields a new directory beside ``path`` to fill; renamed to ``path`` if the block ends
    normally, removed if it raises. ``path`` must not exist, or be an empty directory."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    building = tempfile.mkdtemp(prefix=os.path.basename(path) + ".", suffix=".partial", dir=parent)
    try:
        yield building
        os.chmod(building, 0o777 & ~_umask())  # as os.mkdir would (mkdtemp: 0700)
        if os.path.isdir(path):
            os.rmdir(path)  # empty: a full one raises and nothing is lost
        os.replace(building, path)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
