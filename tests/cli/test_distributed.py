"""Two data-parallel workers under torchrun (gloo, CPU) equal one worker with --update-freq 2."""

import re
import subprocess

import pytest
import torch

from tests.cli.conftest import BIN_DIR, PAPER_OPTIMIZER, PLUGIN_DIR, SMALL_MODEL, run_tool
from tests.support import free_port

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def _losses(log):
    return {int(u): float(loss) for loss, u in re.findall(r"train_inner \| .*?loss=([0-9.]+),.*?num_updates=(\d+),", log)}


def test_torchrun_two_workers_match_update_freq_two(word_task, tmp_path):
    _, data_bin = word_task
    common = [
        data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER, "--dropout", "0",
        "--max-tokens", "300", "--seed", "1", "--max-update", "6", "--no-save",
        "--no-progress-bar", "--log-format", "simple", "--log-interval", "1",
    ]
    single = run_tool("fairseq-train", *common, "--update-freq", "2")
    distributed = subprocess.run(
        [str(BIN_DIR / "torchrun"), "--nproc_per_node", "2", "--master_port", str(free_port()), str(BIN_DIR / "fairseq-train"),
         *map(str, common), "--distributed-world-size", "2", "--distributed-backend", "gloo"],
        capture_output=True, text=True, timeout=300,
    )
    log = distributed.stdout + distributed.stderr
    assert distributed.returncode == 0, log[-3000:]
    assert "distributed init (rank 1): env://" in log
    if torch.cuda.device_count() == 0:  # the plugin's CPU fallback, said in the log
        assert "no GPU, using --ddp-backend legacy_ddp" in log
    expected, actual = _losses(single.stdout + single.stderr), _losses(log)
    assert sorted(expected) == list(range(1, 7)) and sorted(actual) == list(range(1, 7))
    for update in range(1, 7):
        assert abs(actual[update] - expected[update]) <= 0.01 * expected[update], (update, actual, expected)
