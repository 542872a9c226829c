"""Fixes for the host (fairseq 0.12 on torch >= 2.6), kept apart from the model.

Each module fixes one thing fairseq breaks on this platform and is installed when
the plugin is imported (``--user-dir fconv_plugin``):

- safe_loading: checkpoints load under torch's weights_only unpickler;
- atomic_checkpoints: checkpoint copies are never left half written;
- replace_unk: ``--replace-unk`` works as in the paper (fairseq issue #3533);
- interactive_input: bad input lines get one clear message each;
- distributed_cpu: torchrun workers start on machines without GPUs;
- ngram_blocking: ``--no-repeat-ngram-size`` blocks repeats on CPUs too;
- cli_errors: the plugin's errors print as one line, without a traceback.
"""

from . import atomic_checkpoints, cli_errors, distributed_cpu, interactive_input, ngram_blocking, replace_unk, safe_loading


def install() -> None:
    """Install every host fix; safe to call more than once."""
    safe_loading.install()
    atomic_checkpoints.install()
    interactive_input.install()  # before replace_unk, which wraps make_batches again
    replace_unk.install()
    distributed_cpu.install()
    ngram_blocking.install()
    cli_errors.install()
