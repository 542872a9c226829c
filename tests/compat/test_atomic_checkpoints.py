import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import torch
from fairseq.file_io import PathManager

from fconv_plugin.checkpoint_io import copy_atomically

REPO = Path(__file__).resolve().parents[2]


def test_fairseq_checkpoint_copies_go_through_a_temporary_file(tmp_path, monkeypatch):
    source = tmp_path / "checkpoint_3_40.pt"
    source.write_bytes(os.urandom(100_000))
    target = tmp_path / "checkpoint_last.pt"
    target.write_bytes(b"the previous checkpoint")
    replaced = []
    real_replace = os.replace

    def watching_replace(src, dst):
        assert target.read_bytes() == b"the previous checkpoint"  # untouched until the rename
        replaced.append((os.path.dirname(src), dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", watching_replace)
    assert PathManager.copy(str(source), str(target), overwrite=True)
    assert target.read_bytes() == source.read_bytes()
    assert replaced == [(str(tmp_path), str(target))]


def test_leftovers_of_a_killed_copy_are_removed_by_the_next_copy(tmp_path):
    source = tmp_path / "a.pt"
    source.write_bytes(b"x" * 10)
    leftover = tmp_path / "checkpoint_best.pt.abc123.tmp"
    leftover.write_bytes(b"half")
    copy_atomically(str(source), str(tmp_path / "checkpoint_best.pt"))
    assert not leftover.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt", "checkpoint_best.pt"]


def test_a_copy_killed_midway_leaves_the_previous_checkpoint_whole(tmp_path):
    """Deterministic: the copying process reads from a pipe and is killed while it waits
    for the rest of the checkpoint, i.e. certainly in the middle of the copy."""
    pipe = tmp_path / "checkpoint_9_200.pt"
    os.mkfifo(pipe)
    target = tmp_path / "checkpoint_last.pt"
    previous = os.urandom(50_000)
    target.write_bytes(previous)
    new = os.urandom(24 * 2**20)  # the copy moves 16 MiB at a time: one chunk lands, then it waits
    code = ("from fairseq.file_io import PathManager; from fconv_plugin import compat; compat.install(); "
            f"PathManager.copy({str(pipe)!r}, {str(target)!r}, overwrite=True)")
    copying = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=subprocess.PIPE)
    try:
        with open(pipe, "wb") as writer:  # blocks until the copy opens the pipe
            writer.write(new[: 20 * 2**20])
            writer.flush()
            deadline = time.monotonic() + 60
            while not _temporary_files(tmp_path) or _temporary_files(tmp_path)[0].stat().st_size == 0:
                assert time.monotonic() < deadline, "the copy never started writing"
                assert copying.poll() is None, copying.stderr.read().decode()[-2000:]
                time.sleep(0.01)
            copying.send_signal(signal.SIGKILL)
            copying.wait(timeout=30)
    except BrokenPipeError:  # the killed reader closed the pipe under the writer
        pass
    finally:
        if copying.poll() is None:
            copying.kill()
    assert copying.returncode == -signal.SIGKILL
    assert target.read_bytes() == previous  # never half written
    assert len(_temporary_files(tmp_path)) == 1  # what the killed copy left

    source = tmp_path / "checkpoint_10_220.pt"
    source.write_bytes(new)
    assert PathManager.copy(str(source), str(target), overwrite=True)
    assert target.read_bytes() == new
    assert _temporary_files(tmp_path) == []


def _temporary_files(directory):
    return sorted(directory.glob("checkpoint_last.pt.*.tmp"))


def test_a_copy_gets_the_permissions_fairseqs_plain_copy_gives(tmp_path):
    """mkstemp makes 0600 files; checkpoint_best.pt must stay as readable as fairseq makes it."""
    source = tmp_path / "checkpoint_2_600.pt"
    source.write_bytes(b"weights")
    for umask in (0o022, 0o077, 0o002):
        previous = os.umask(umask)
        try:
            plain, atomic = tmp_path / f"plain-{umask:o}.pt", tmp_path / f"atomic-{umask:o}.pt"
            shutil.copyfile(source, plain)  # what fairseq's PathManager.copy does without the plugin
            copy_atomically(str(source), str(atomic))
        finally:
            os.umask(previous)
        assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~umask


def test_a_save_first_removes_what_killed_saves_left(tmp_path):
    from fairseq import checkpoint_utils

    left = ["checkpoint_3_40.pt.tmp", "checkpoint_last.pt.k2j4x9.tmp"]
    kept = ["checkpoint_3_30.pt", "notes.tmp", "checkpoint_last.pt"]
    for name in left + kept:
        (tmp_path / name).write_bytes(b"something")
    checkpoint_utils.torch_persistent_save({"model": {"w": torch.ones(3)}}, str(tmp_path / "checkpoint_4_50.pt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept + ["checkpoint_4_50.pt"])
    assert (tmp_path / "checkpoint_3_30.pt").read_bytes() == b"something"
    assert torch.load(tmp_path / "checkpoint_4_50.pt")["model"]["w"].tolist() == [1.0, 1.0, 1.0]
