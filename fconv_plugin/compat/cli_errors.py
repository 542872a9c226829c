"""Print the plugin's own errors as the one line they are, without a traceback.

An ``FConvError`` names the problem and what to do, so fairseq's command-line tools
print ``fconv_plugin: error: <message>`` and exit with status 1 instead of a
traceback; any other exception keeps Python's usual report.
"""

import sys

from ..errors import FConvError
from ._patching import patch


def _excepthook(previous):
    def excepthook(exc_type, exc, tb):
        if issubclass(exc_type, FConvError):
            print(f"fconv_plugin: error: {exc}", file=sys.stderr)
            return
        previous(exc_type, exc, tb)

    return excepthook


def install() -> None:
    patch(sys, "excepthook", "cli_errors", _excepthook)
