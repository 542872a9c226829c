"""Importing the plugin leaves the host alone; fairseq's --user-dir installs the fixes.

Each case runs in a fresh Python process: this test session has installed the
fixes itself (tests/conftest.py).
"""

import json
import os
import subprocess
import sys

import fconv_plugin

PLUGIN_DIR = os.path.dirname(fconv_plugin.__file__)

# the host state the fixes would change, as JSON
HOST_STATE = """
import json, logging, sys, torch
from fairseq import checkpoint_utils, file_io
from fairseq.ngram_repeat_block import NGramRepeatBlock
from fairseq.tasks import FairseqTask
root = logging.getLogger()
def patched(function):
    return sorted(getattr(function, "_fconv_plugin_patches", ()))
def host_state():
    return {
        "root_handlers": [repr(h) for h in root.handlers], "root_level": root.level,
        "safe_globals": [repr(g) for g in torch.serialization.get_safe_globals()],
        "excepthook_is_pythons": sys.excepthook is sys.__excepthook__,
        "fairseq_cli_imported": sorted(m for m in sys.modules if m.startswith("fairseq_cli")),
        "patched": patched(checkpoint_utils.load_checkpoint_to_cpu) + patched(file_io.PathManager.copy)
                   + patched(NGramRepeatBlock.forward) + patched(FairseqTask.build_generator),
    }
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HOST_STATE + code], capture_output=True, text=True, check=True,
                          timeout=120, cwd=os.path.dirname(PLUGIN_DIR))


def test_importing_the_plugin_changes_no_logging_allowlist_hook_or_fairseq_function():
    result = _run(
        "import fairseq.models, fairseq.tasks\n"  # fairseq configures logging itself when imported
        "before = host_state()\n"
        "import fconv_plugin, fconv_plugin.compat\n"
        "from fconv_plugin.modules import AttentionLayer\n"
        "print(json.dumps([before, host_state(), fconv_plugin.compat.installed()]))\n"
    )
    before, after, installed = json.loads(result.stdout.splitlines()[-1])
    assert after == before
    assert after["patched"] == [] and after["fairseq_cli_imported"] == []
    assert installed is False
    assert "host fixes active" not in result.stderr


def test_user_dir_installs_every_fix_and_says_so_in_one_log_line():
    result = _run(
        "import argparse, logging\n"
        "import fairseq_cli.train  # what the fairseq-train console script imports first\n"
        "logging.getLogger().setLevel(logging.INFO)\n"
        "from fairseq import utils\n"
        f"utils.import_user_module(argparse.Namespace(user_dir={PLUGIN_DIR!r}))\n"
        "import fconv_plugin\n"
        "fconv_plugin.compat.install()  # a second time: nothing new, no second line\n"
        "print(json.dumps([host_state(), fconv_plugin.compat.installed()]))\n"
    )
    state, installed = json.loads(result.stdout.splitlines()[-1])
    assert installed is True
    assert set(state["patched"]) >= {"safe_loading", "atomic_checkpoints", "ngram_blocking", "replace_unk"}
    assert not state["excepthook_is_pythons"]
    # checkpoints get their allowance only while fairseq loads them
    assert not any("Namespace" in name or "numpy" in name for name in state["safe_globals"])
    lines = [line for line in result.stderr.splitlines() if "host fixes active" in line]
    assert len(lines) == 1
    assert lines[0].endswith("host fixes active: safe_loading, atomic_checkpoints, interactive_input, "
                             "replace_unk, distributed_cpu, ngram_blocking, cli_errors, finished_training, data_bin_checks, "
                             "complete_batches, diverse_beam, cpu_bf16, cpu_training_memory, training_budget, moses_round_trip")


def test_user_dir_outside_fairseqs_commands_leaves_the_host_alone():
    result = _run(
        "import argparse\n"
        "from fairseq import utils\n"
        "before = host_state()\n"
        f"utils.import_user_module(argparse.Namespace(user_dir={PLUGIN_DIR!r}))\n"
        "import fconv_plugin, fconv_plugin.compat\n"
        "print(json.dumps([before, host_state(), fconv_plugin.compat.installed()]))\n"
    )
    before, after, installed = json.loads(result.stdout.splitlines()[-1])
    assert after == before and installed is False
