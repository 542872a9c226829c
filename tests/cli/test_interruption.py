"""fairseq-train killed with SIGKILL mid-epoch resumes from checkpoint_last.pt and
finishes as an uninterrupted run would; no checkpoint is ever left half written."""

import collections
import os
import random
import re
import signal
import subprocess
import threading
import time

import pytest

from tests import warm_commands
from tests.support import load_raw_checkpoint
from tests.tasks import PLUGIN_DIR, SMALL_MODEL, preprocess, valid_losses, write_corpus
from tests.support import checkpoint_updates

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


TIMEOUT = 600  # seconds for one training run; the test fails rather than hangs


def noisy_translation_pair(rng):
    """Each source word has two equally likely translations: the loss settles near 1 bit a word."""
    words = [rng.randrange(30) for _ in range(rng.randint(3, 9))]
    return [f"s{w}" for w in words], [f"{rng.choice('tu')}{w}" for w in words]


@pytest.fixture(scope="module")
def noisy_task(tmp_path_factory):
    root = tmp_path_factory.mktemp("noisy_task")
    write_corpus(root, noisy_translation_pair, sizes=(("train", 600), ("valid", 100), ("test", 10)), seed=7)
    return preprocess(root, root / "data-bin")


def _train_command(data_bin, save_dir):
    # fairseq does not resume bit-exactly (after a restart its own models see the next
    # epoch's batches in another order), so the run anneals its learning rate to settle
    # where the data order no longer matters.
    return [
        str(warm_commands.bin_dir() / "fairseq-train"), str(data_bin), "--user-dir", PLUGIN_DIR, *SMALL_MODEL,
        "--optimizer", "adam", "--lr", "0.003", "--clip-norm", "0.1",
        "--lr-scheduler", "polynomial_decay", "--total-num-update", "160", "--end-learning-rate", "0",
        "--dropout", "0.1", "--max-tokens", "600", "--max-epoch", "16", "--save-dir", str(save_dir),
        "--save-interval-updates", "4", "--seed", "1", "--no-progress-bar", "--log-format", "simple",
    ]


def _sigkill(process):
    """SIGKILL the training process itself at this moment: the command behind a warm shim
    (tests/warm_commands.py), whose shim then ends as killed by SIGKILL too."""
    try:
        os.kill(warm_commands.command_pid(process.pid), signal.SIGKILL)
    except ProcessLookupError:  # it had just ended
        pass


def _all_checkpoints_load(save_dir):
    for path in save_dir.glob("*.pt"):
        load_raw_checkpoint(path)  # raises on a truncated file


@pytest.mark.long
def test_sigkill_mid_epoch_then_restart_matches_an_uninterrupted_run(noisy_task, tmp_path):
    data_bin = noisy_task
    reference = subprocess.run(_train_command(data_bin, tmp_path / "reference"), capture_output=True, text=True,
                               check=True, timeout=TIMEOUT)
    reference_loss = valid_losses(reference.stdout + reference.stderr)[-1]

    save_dir = tmp_path / "interrupted"
    kills = 0
    for epoch in (4, 9):  # kill twice, each time right after a mid-epoch save starts
        process = subprocess.Popen(_train_command(data_bin, save_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and process.poll() is None:
            if list(save_dir.glob(f"checkpoint_{epoch}_*.pt")):
                _sigkill(process)
                kills += 1
                break
            time.sleep(0.005)
        process.kill()  # no-op after the SIGKILL; ends a run that reached the deadline
        process.wait(timeout=60)
        _all_checkpoints_load(save_dir)
    assert kills == 2

    resumed = subprocess.run(_train_command(data_bin, save_dir), capture_output=True, text=True, check=True,
                             timeout=TIMEOUT)
    log = resumed.stdout + resumed.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch 9 @ \d+ updates\)", log), log[-3000:]
    assert "done training" in log
    resumed_loss = valid_losses(log)[-1]
    print(f"final validation loss: uninterrupted {reference_loss}, killed twice and resumed {resumed_loss}")
    assert abs(resumed_loss - reference_loss) <= 0.01 * reference_loss
    _all_checkpoints_load(save_dir)
    assert not list(save_dir.glob("*.pt.*.tmp"))  # what a killed copy left was cleaned up


KILL_TRIALS = 20
FINAL_UPDATE = 300  # more than 20 trials can reach: each is killed within a few updates


def _frequent_saves_command(data_bin, save_dir):
    """A save every 3 updates and at each short epoch's end, old ones deleted: kills often land in one."""
    return [
        str(warm_commands.bin_dir() / "fairseq-train"), str(data_bin), "--user-dir", PLUGIN_DIR, *SMALL_MODEL,
        "--optimizer", "adam", "--lr", "0.003", "--max-tokens", "300", "--max-update", str(FINAL_UPDATE),
        "--save-interval-updates", "3", "--keep-interval-updates", "2", "--keep-last-epochs", "2",
        "--save-dir", str(save_dir), "--seed", "1", "--no-progress-bar", "--log-format", "simple",
        "--log-interval", "1",
    ]


class _Run:
    """fairseq-train in a child process, with the number of updates it has logged so far."""

    def __init__(self, command):
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.updates = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.updates += "num_updates=" in line

    def wait_until(self, condition, timeout=120, poll=0.001):
        deadline = time.time() + timeout
        while time.time() < deadline and self.process.poll() is None and not condition():
            time.sleep(poll)

    def kill(self) -> bool:
        running = self.process.poll() is None
        if running:
            _sigkill(self.process)
        self.process.wait(timeout=60)
        self._reader.join(timeout=60)
        return running


def _kill_at_a_seeded_moment(command, save_dir, rng):
    """Start ``command`` and SIGKILL it at a moment the seeded ``rng`` picks, bounded by
    events rather than the clock, so that a fast machine does not train to the end:
    during start-up and loading, after the n-th logged update, or 0-5 ms after the n-th
    file appears in the save directory (most often a save's temporary file)."""
    run = _Run(command)
    moment = rng.choice(["start-up", "training", "saving"])
    if moment == "start-up":
        deadline = time.time() + rng.uniform(0.0, 4.0)
        run.wait_until(lambda: time.time() > deadline or run.updates > 0)
    elif moment == "training":
        after = rng.randint(1, 8)
        run.wait_until(lambda: run.updates >= after)
    else:
        seen = set(os.listdir(save_dir)) if save_dir.exists() else set()
        events, wanted = [], rng.randint(1, 4)

        def enough_new_files():
            if save_dir.exists():
                new = set(os.listdir(save_dir)) - seen
                events.extend(new)
                seen.update(new)
            return len(events) >= wanted

        run.wait_until(enough_new_files, poll=0.0002)
        time.sleep(rng.uniform(0.0, 0.005))
    return moment, run.kill()


@pytest.mark.long
def test_twenty_seeded_sigkills_lose_nothing_and_the_run_resumes_to_its_end(word_task, tmp_path):
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    command = _frequent_saves_command(data_bin, save_dir)
    progress = []  # checkpoint_last's update after each kill
    moments = collections.Counter()
    kills = inside_a_save = 0
    for trial in range(KILL_TRIALS):
        moment, killed = _kill_at_a_seeded_moment(command, save_dir, random.Random(trial))
        moments[moment] += 1
        kills += killed
        inside_a_save += bool(list(save_dir.glob("*.tmp")))  # a save or copy was cut short
        _all_checkpoints_load(save_dir)
        last = save_dir / "checkpoint_last.pt"
        progress.append(checkpoint_updates(last) if last.exists() else 0)
    print(f"{kills} kills ({dict(moments)}), {inside_a_save} left a save's temporary file; "
          f"checkpoint_last after each: {progress}")
    assert kills == KILL_TRIALS and progress[-1] < FINAL_UPDATE  # every trial was a kill before the end
    assert progress == sorted(progress)  # a kill never took back a saved update

    resumed = subprocess.run(command, capture_output=True, text=True, check=True, timeout=TIMEOUT)
    assert "done training" in resumed.stdout + resumed.stderr
    _all_checkpoints_load(save_dir)
    assert checkpoint_updates(save_dir / "checkpoint_last.pt") == FINAL_UPDATE
    assert not list(save_dir.glob("*.tmp")), sorted(p.name for p in save_dir.iterdir())
