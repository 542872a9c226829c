"""Never leave a half-written checkpoint behind.

fairseq writes the first checkpoint of a save atomically (a ``.tmp`` file, then a
rename) but makes the others — ``checkpoint_last.pt``, ``checkpoint_best.pt`` — with a
plain file copy. A run killed during that copy leaves a truncated
``checkpoint_last.pt``, and the restart that should resume from it fails. Copies of
local files now go through a temporary file in the same directory and an atomic
``os.replace`` (``fconv_plugin.checkpoint_io``); temporary files a killed copy left behind are removed by the next
copy to the same checkpoint. The copy gets the permissions a plain copy would
(``0666`` less the umask), not ``mkstemp``'s private ``0600``.

A save whose write fails (a full disk, a file-size limit) left fairseq's ``.tmp`` file
behind and ended in a traceback; now the partial file is removed and the run stops
with one line that says which checkpoint could not be written and that the earlier
ones are intact. A run killed during a save leaves its temporary file; the next save
to the same directory removes such leftovers first.
"""

import glob
import os

from fairseq import checkpoint_utils, file_io

from ..checkpoint_io import copy_atomically
from ..errors import FConvError
from ._patching import patch


def _copy(original):
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if file_io.IOPathManager is not None or "://" in str(src_path) + str(dst_path):
            return original(src_path, dst_path, overwrite)
        return copy_atomically(src_path, dst_path)

    return staticmethod(copy)


def remove_leftovers(directory: str) -> None:
    """Remove the temporary files of saves and copies that a killed run left in ``directory``."""
    for pattern in ("*.pt.tmp", "*.pt.*.tmp"):
        for stale in glob.glob(os.path.join(glob.escape(directory), pattern)):
            os.remove(stale)


def _save_or_remove_partial(original):
    def torch_persistent_save(obj, filename, async_write: bool = False):
        if isinstance(filename, str) and "://" not in filename:
            remove_leftovers(os.path.dirname(os.path.abspath(filename)))
        try:
            return original(obj, filename, async_write)
        except OSError as error:
            partial = f"{filename}.tmp"
            if isinstance(filename, str) and os.path.exists(partial):
                os.remove(partial)
            raise FConvError(
                f"could not write checkpoint {filename} ({error.strerror or error}); the partial file was removed "
                "and the checkpoints written before are intact; free space (or raise the file-size limit) and "
                "run the same command again to resume"
            ) from error

    return torch_persistent_save


def install() -> None:
    patch(file_io.PathManager, "copy", "atomic_checkpoints", _copy)
    patch(checkpoint_utils, "torch_persistent_save", "atomic_checkpoints", _save_or_remove_partial)
