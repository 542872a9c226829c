"""Every benchmark runs: its ``--quick`` mode (the same code at a tiny size, on a quickstart
run of a few updates made once here), so that none rots between the runs that measure."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests import warm_commands

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if p.name != "harness.py")

pytestmark = pytest.mark.slow


def test_a_quick_run_is_trained_not_evaluated_and_leaves_runs_latest(quickstart_run):
    latest = ROOT / "examples" / "bible_es_en" / "runs" / "latest"
    assert not latest.exists() or latest.resolve() != quickstart_run.resolve(), "a run written elsewhere took runs/latest"
    assert (quickstart_run / "checkpoints" / "checkpoint_best.pt").exists()
    assert not (quickstart_run / "generate.out").exists()  # EVALUATE=0: trained, not evaluated


def test_at_most_eight_benchmarks_share_the_harness():
    assert len(BENCHMARKS) <= 8, BENCHMARKS
    for name in BENCHMARKS:
        text = (ROOT / "benchmarks" / name).read_text()
        assert "import harness" in text, f"{name} does not use benchmarks/harness.py"
        assert "--quick" in text or "harness.arguments" in text, f"{name} has no --quick mode"


def test_no_benchmark_uses_a_private_api():
    """A benchmark measures what users run: no private name of the plugin (``translator._batches``,
    ``from fconv_plugin... import _x``); torch's and Python's own are theirs to keep."""
    for name in BENCHMARKS:
        for line in (ROOT / "benchmarks" / name).read_text().splitlines():
            code = line.split("#")[0]
            owners = {owner for owner, _ in re.findall(r"(\w+)\._([a-z]\w*)", code)}
            assert {o for o in owners if not o.startswith("_")} <= {"torch", "sys", "os", "np", "ort", "self"}, f"{name}: {line.strip()}"
            assert not re.search(r"from fconv_\w+[\w.]* import .*\b_[a-z]", code), f"{name}: {line.strip()}"


@pytest.mark.long
@pytest.mark.parametrize("name", BENCHMARKS)
def test_quick_mode_runs(name, quickstart_run):
    # warm (tests/warm_commands.py), and so is every process it starts with sys.executable
    result = subprocess.run([str(warm_commands.bin_dir() / "python"), str(ROOT / "benchmarks" / name), "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=900,
                            env={**os.environ, "FCONV_QUICK_RUN": str(quickstart_run)})
    assert result.returncode == 0, f"{name} --quick failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), f"{name} --quick printed nothing"
