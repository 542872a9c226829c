"""fairseq's checkpoint loader under torch's safe unpickler (torch >= 2.6).

The loading itself, the allowlist of fairseq's checkpoint types and the one-line
explanations live in ``fconv_plugin.checkpoint_io``; this fix makes fairseq's own
``load_checkpoint_to_cpu`` (fairseq-train's resume, fairseq-generate, -interactive)
load through it.
"""

import functools

from fairseq import checkpoint_utils

from ..checkpoint_io import explain_unreadable_contents, loading_fairseq_checkpoints
from ..errors import FConvError
from ._patching import patch


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
