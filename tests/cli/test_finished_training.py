"""fairseq-train run again after it reached --max-update trains nothing and rewrites nothing."""

import hashlib
import re

import pytest

from tests.tasks import PLUGIN_DIR, TWENTY_UPDATES, run_tool
from tests.support import checkpoint_updates

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def _digests(save_dir):
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(save_dir.glob("*.pt"))}


def test_restarting_a_finished_run_changes_no_checkpoint(twenty_update_run):
    data_bin, save_dir, first = twenty_update_run

    def command(max_update):
        return ["fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *TWENTY_UPDATES, "--max-update", str(max_update),
                "--save-dir", save_dir]

    assert "done training" in first
    finished = _digests(save_dir)
    assert checkpoint_updates(save_dir / "checkpoint_last.pt") == 20

    for _ in range(3):
        again = run_tool(*command(20))
        log = again.stdout + again.stderr
        assert "the checkpoint is at update 20, --max-update is 20: nothing to train" in log
        assert not re.search(r"num_updates: 2[1-9]", log)
        assert _digests(save_dir) == finished  # byte for byte, every file

    more = run_tool(*command(25))  # a larger budget still resumes
    assert checkpoint_updates(save_dir / "checkpoint_last.pt") == 25
    assert "nothing to train" not in more.stdout + more.stderr
