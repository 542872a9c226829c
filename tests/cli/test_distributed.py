"""Two data-parallel workers under torchrun (gloo, CPU) equal one worker with --update-freq 2,
in float32 and, on a CPU with bfloat16 units, with --bf16 (mixed precision)."""

import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

from fconv_plugin import precision
from tests.support import free_port
from tests.tasks import BIN_DIR, PAPER_OPTIMIZER, PLUGIN_DIR, SMALL_MODEL, run_tool

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools

# fairseq-train with forward hooks that write what each worker's products computed in
WATCHED_TRAIN = Path(__file__).with_name("watched_train.py")


def _losses(log):
    return {int(u): float(loss) for loss, u in re.findall(r"train_inner \| .*?loss=([0-9.]+),.*?num_updates=(\d+),", log)}


BF16_UNITS = precision.bf16_units()
PRECISIONS = [
    pytest.param([], id="float32"),
    pytest.param(["--cpu", "--bf16"], id="bf16", marks=pytest.mark.skipif(
        BF16_UNITS is None, reason="this CPU has no bfloat16 units (AMX-BF16 or AVX-512 BF16): --bf16 is refused")),
]


@pytest.mark.parametrize("precision_options", PRECISIONS)
def test_torchrun_two_workers_match_update_freq_two(word_task, precision_options, tmp_path):
    _, data_bin = word_task
    common = [
        data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER, "--dropout", "0",
        "--max-tokens", "300", "--seed", "1", "--max-update", "6", "--no-save",
        "--no-progress-bar", "--log-format", "simple", "--log-interval", "1", *precision_options,
    ]
    single = run_tool("fairseq-train", *common, "--update-freq", "2")
    dtypes = tmp_path / "dtypes"
    dtypes.mkdir()
    distributed = subprocess.run(
        [str(BIN_DIR / "torchrun"), "--nproc_per_node", "2", "--master_port", str(free_port()), str(WATCHED_TRAIN),
         *map(str, common), "--distributed-world-size", "2", "--distributed-backend", "gloo"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "FCONV_TEST_DTYPES": str(dtypes)},
    )
    log = distributed.stdout + distributed.stderr
    assert distributed.returncode == 0, log[-3000:]
    assert "distributed init (rank 1): env://" in log
    if torch.cuda.device_count() == 0:  # the plugin's CPU fallback, said in the log
        assert "no GPU, using --ddp-backend legacy_ddp" in log
    if precision_options:
        # each worker says what its model computes in, gathered: only the first worker's INFO lines reach the log
        assert log.count(f"--bf16 on the CPU ({BF16_UNITS}): products and convolutions in bfloat16 on 2 of 2 workers;") == 1
    # what each worker's convolutions and output projection computed in, seen by forward hooks
    seen = {path.name: set(path.read_text().split()) for path in dtypes.iterdir()}
    computed = "torch.bfloat16" if precision_options else "torch.float32"
    assert seen == {"rank0": {computed}, "rank1": {computed}}, seen
    expected, actual = _losses(single.stdout + single.stderr), _losses(log)
    assert sorted(expected) == list(range(1, 7)) and sorted(actual) == list(range(1, 7))
    for update in range(1, 7):
        assert abs(actual[update] - expected[update]) <= 0.01 * expected[update], (update, actual, expected)
