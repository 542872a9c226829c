"""A checkpoint save whose write fails part-way (a file-size limit, as a full disk would):
a one-line error, no partial file, and the checkpoints written before intact."""

import hashlib
import resource

import pytest

from tests.tasks import PLUGIN_DIR, TWENTY_UPDATES, run_tool
from tests.support import checkpoint_updates, load_raw_checkpoint

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def _train(data_bin, save_dir, max_update, **kwargs):
    """The 20-update run's command (``TWENTY_UPDATES``) with another --max-update."""
    return run_tool("fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *TWENTY_UPDATES, "--max-update", max_update,
                    "--save-dir", save_dir, **kwargs)


def test_a_write_that_fails_leaves_no_partial_file_and_loses_nothing(twenty_update_run):
    data_bin, save_dir, _ = twenty_update_run
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in save_dir.glob("*.pt")}
    size = (save_dir / "checkpoint_last.pt").stat().st_size
    limit = size // 2  # below one checkpoint: the next save fails half way

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    failed = _train(data_bin, save_dir, 40, check=False, preexec_fn=limit_file_size)
    assert failed.returncode != 0
    errors = [line for line in failed.stderr.splitlines() if line.startswith("fconv_plugin: error:")]
    assert len(errors) == 1 and "could not write checkpoint" in errors[0] and "intact" in errors[0], failed.stderr[-2000:]
    assert "_30.pt" in errors[0]  # the save at update 30
    assert not list(save_dir.glob("*.tmp")), sorted(p.name for p in save_dir.iterdir())
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in save_dir.glob("*.pt")}
    assert after == before  # nothing written before was touched
    for name in after:
        assert load_raw_checkpoint(save_dir / name)["model"]

    resumed = _train(data_bin, save_dir, 40)  # without the limit the same command goes on
    assert checkpoint_updates(save_dir / "checkpoint_last.pt") == 40
    assert "loaded checkpoint" in (resumed.stdout + resumed.stderr).lower()
