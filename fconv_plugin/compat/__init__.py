"""Fixes for the host (fairseq 0.12 on torch >= 2.6), kept apart from the model.

Each module fixes one thing fairseq breaks on this platform and is installed when
the plugin is imported (``--user-dir fconv_plugin``).
"""

from . import replace_unk, safe_loading


def install() -> None:
    """Install every host fix; safe to call more than once."""
    safe_loading.install()
    replace_unk.install()
