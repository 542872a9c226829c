"""Fixes for the host (fairseq 0.12 on torch >= 2.6), kept apart from the model.

Each module fixes one thing fairseq breaks on this platform:

- safe_loading: checkpoints load under torch's weights_only unpickler;
- atomic_checkpoints: checkpoint copies are never left half written;
- replace_unk: ``--replace-unk`` works as in the paper (fairseq issue #3533);
- interactive_input: bad input lines get one clear message each;
- distributed_cpu: torchrun workers start on machines without GPUs;
- ngram_blocking: ``--no-repeat-ngram-size`` blocks repeats on CPUs too;
- cli_errors: the plugin's errors print as one line, without a traceback;
- finished_training: ``fairseq-train`` run again after it finished trains nothing;
- data_bin_checks: a damaged data-bin gets one line that names the file;
- complete_batches: evaluation and training batch every sentence (fairseq #5036);
- diverse_beam: ``--diverse-beam-groups`` on subsets larger than one batch;
- cpu_bf16: ``--bf16`` on a CPU trains in mixed precision instead of asking for a TPU;
- cpu_training_memory: training on a CPU reuses freed memory for its large tensors;
- training_budget: ``--lr-scheduler time_budget`` gets the trainer's clock and stops training;
- moses_round_trip: ``--tokenizer moses`` gives back C++, C# and quotation marks as written.

Commands run one after another in one process (``fairseq_cli.generate.main(...)`` after
``train.main(...)``, as fairseq's own tests do) each get the fixes they need: fairseq
imports a ``--user-dir`` once, so ``install`` runs again whenever a command asks for it.

They change fairseq's behaviour for the whole process, so importing the plugin does
not install them (nor import this package): fairseq's ``--user-dir`` does
(``fconv_plugin/__init__.py`` asks ``running_fairseq_command``), as do the plugin's own
commands; anyone else calls ``install()``. ``FConvModel.from_pretrained`` and the
inference core need none of them installed: they load checkpoints through
``fconv_plugin.checkpoint_io``.
"""

import logging

from fairseq import checkpoint_utils
from fairseq import utils as fairseq_utils

from . import (
    atomic_checkpoints,
    console,
    cli_errors,
    cpu_bf16,
    cpu_training_memory,
    complete_batches,
    data_bin_checks,
    diverse_beam,
    distributed_cpu,
    finished_training,
    interactive_input,
    moses_round_trip,
    ngram_blocking,
    replace_unk,
    safe_loading,
    training_budget,
)
from ._patching import patch

logger = logging.getLogger(__name__)

FIXES = {
    "safe_loading": safe_loading,
    "atomic_checkpoints": atomic_checkpoints,
    "interactive_input": interactive_input,
    "replace_unk": replace_unk,
    "distributed_cpu": distributed_cpu,
    "ngram_blocking": ngram_blocking,
    "cli_errors": cli_errors,
    "finished_training": finished_training,
    "data_bin_checks": data_bin_checks,
    "complete_batches": complete_batches,
    "diverse_beam": diverse_beam,
    "cpu_bf16": cpu_bf16,
    "cpu_training_memory": cpu_training_memory,
    "training_budget": training_budget,
    "moses_round_trip": moses_round_trip,
}


def installed() -> bool:
    """Whether this process has the fixes (read off fairseq's checkpoint loader)."""
    return "safe_loading" in getattr(checkpoint_utils.load_checkpoint_to_cpu, "_fconv_plugin_patches", ())


def _installing_again(import_user_module):
    def import_user_module_with_fixes(args):
        import_user_module(args)
        install()  # a command run later in this process: its own module's fixes

    return import_user_module_with_fixes


def install() -> None:
    """Install every host fix and say so once in the log; safe to call more than once."""
    first_time = not installed()
    for fix in FIXES.values():
        fix.install()
    patch(fairseq_utils, "import_user_module", "compat", _installing_again)
    if first_time:
        logger.info("fconv_plugin: host fixes active: %s", ", ".join(FIXES))
