"""Load fairseq checkpoints under torch's safe unpickler (torch >= 2.6).

torch now loads with ``weights_only=True`` and refuses any pickled global it does
not know, and every fairseq checkpoint stores its options as an
``argparse.Namespace``. Rather than switching the safe loader off, the plugin allows
exactly the types fairseq checkpoints contain, and only while fairseq's checkpoint
loader runs (torch's ``safe_globals`` context; the process-wide allowlist is left
alone). Anything else is still refused, before any of it runs, and reported (like
truncated or corrupt files) in one line.
"""

import argparse
import contextlib
import functools
import os
import re
import traceback

import numpy
import torch
from fairseq import checkpoint_utils

from ..errors import FConvError
from ._patching import patch


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


def _raised_inside_torch_load(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return any(os.path.join("torch", "serialization.py") in frame.filename for frame in frames)


def _first_line(message: str) -> str:
    lines = [line for line in message.splitlines() if line.strip() and "Weights only load failed" not in line]
    return lines[0].strip()[:200] if lines else "no detail"


def explain_unreadable_contents(path: str, error: BaseException) -> FConvError:
    """A one-line explanation for a file that unpickled but is no checkpoint fairseq can read."""
    return FConvError(
        f"checkpoint {path} is corrupt or not a fairseq checkpoint: fairseq could not read what it holds "
        f"({type(error).__name__}: {_first_line(str(error))}); copy it again or load "
        "another checkpoint, and pass --user-dir for a model a plugin defines"
    )


def _load_or_explain(load):
    @functools.wraps(load)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        try:
            with loading_fairseq_checkpoints(path):  # explains what fails inside torch.load
                return load(path, *args, **kwargs)
        except (OSError, FConvError):
            raise
        except Exception as e:
            # a damaged file can unpickle into a structure fairseq's upgrade of old
            # checkpoints trips over (a KeyError on a mangled name, a None list, ...)
            raise explain_unreadable_contents(path, e) from None

    return load_checkpoint_to_cpu


def install() -> None:
    patch(checkpoint_utils, "load_checkpoint_to_cpu", "safe_loading", _load_or_explain)
