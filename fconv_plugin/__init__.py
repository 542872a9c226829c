"""fconv_plugin: ConvS2S (Gehring et al. 2017) as a fairseq plugin.

Importing it registers its model under fairseq's fconv names. Loaded through
fairseq's ``--user-dir`` in one of fairseq's commands it also installs the host fixes
in ``fconv_plugin.compat`` (other programs call ``fconv_plugin.compat.install()`` if they
want them); otherwise it does not import them.

The package's layers each import only those below them, in the order ``LAYERS`` in
tests/test_layers.py states (docs/design.md#layers says what each part is).
"""

import logging
import os
import sys
from typing import List


def running_fairseq_command() -> bool:
    """True in a process that runs one of fairseq's commands (fairseq-train, -generate,
    -interactive, ...): only they import ``fairseq_cli``, which ``--user-dir`` then loads
    the plugin into. Importing fairseq or the plugin never imports it."""
    return any(name == "fairseq_cli" or name.startswith("fairseq_cli.") for name in sys.modules)


def _import_fairseq_keeping_logging() -> None:
    """Import fairseq and leave the process's logging as it was: importing it runs its
    text_to_speech task's ``logging.basicConfig(level=DEBUG)``, which puts every library's
    DEBUG lines (hydra's among them) on stderr, and logs a request for tensorboardX. A
    program that imports the plugin keeps its own logging; the plugin's commands set
    theirs up (``compat.console``). fairseq's commands configure logging themselves."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    speech = logging.getLogger("fairseq.tasks.text_to_speech")
    speech_level = speech.level
    speech.setLevel(logging.WARNING)
    try:
        import fairseq.tasks  # noqa: F401
    finally:
        speech.setLevel(speech_level)
        root.setLevel(level)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)


if "fairseq" not in sys.modules and not running_fairseq_command():
    _import_fairseq_keeping_logging()

from .errors import FConvError  # noqa: E402
from .models import ARCHITECTURES, FConvDecoder, FConvEncoder, FConvModel  # noqa: E402
from . import optim  # noqa: E402,F401  (--lr-scheduler time_budget)


def with_plugin_user_dir(argv: List[str]) -> List[str]:
    """fairseq's command-line ``argv`` with ``--user-dir`` naming this package, unless it
    names one already: the plugin's commands parse fairseq's options with the model registered."""
    if any(arg == "--user-dir" or arg.startswith("--user-dir=") for arg in argv):
        return list(argv)
    return ["--user-dir", os.path.dirname(os.path.abspath(__file__)), *argv]


if running_fairseq_command():  # fairseq's --user-dir in fairseq-train & co.
    from . import compat

    compat.install()

__version__ = "0.1.0"
__all__ = ["ARCHITECTURES", "FConvDecoder", "FConvEncoder", "FConvError", "FConvModel"]
