import sys
import warnings
from pathlib import Path

import pytest
import torch

from fconv_plugin import compat

# Tests that run fairseq in this process (loading checkpoints, beam search with
# n-gram blocking) see it as fairseq's commands do with --user-dir fconv_plugin.
# What importing the plugin alone does is tested in fresh processes
# (tests/compat/test_install.py).
compat.install()

# fairseq's reference model uses torch's deprecated weight_norm; keep test output readable.
warnings.filterwarnings("ignore", category=FutureWarning)


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory):
    """A real quickstart run of 8 updates, trained, not evaluated (``benchmarks/harness.quick_run``:
    the quickstart's own script), for what reads a run's files: the benchmarks' --quick
    modes, documented command lines."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import harness

    return harness.quick_run(tmp_path_factory.mktemp("quickstart") / "run")
