"""tests/warm_commands.py runs a command as the command itself runs: the same output, exit
status and signals, its environment's effects, and a plain process where the warm one
would differ. The reference is the real console script run in a new process."""

import os
import re
import signal
import subprocess
import time

import pytest

from tests import warm_commands
from tests.tasks import BIN_DIR, PLUGIN_DIR

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)


def _both(*argv, **kwargs):
    """(the real script in a new process, the same through the shim)."""
    assert warm_commands.wait_until_warm()
    kwargs.update(capture_output=True, text=True, timeout=300)
    real = subprocess.run([str(BIN_DIR / argv[0]), *argv[1:]], **kwargs)
    warm = subprocess.run([str(warm_commands.bin_dir() / argv[0]), *argv[1:]], **kwargs)
    return real, warm


def _forked(argv_start: str):
    """The pids the warm process forked for commands whose argv starts with ``argv_start``."""
    return [int(pid) for pid, argv in re.findall(r"^warm: (\d+) runs (.*)$", warm_commands.log(), re.MULTILINE)
            if argv.startswith(argv_start)]


def test_a_command_prints_and_exits_as_its_real_script_does(tmp_path):
    real, warm = _both("fconv-info")
    assert (warm.returncode, warm.stdout, warm.stderr) == (real.returncode, real.stdout, real.stderr)
    assert _forked(str(BIN_DIR / "fconv-info"))  # it did run warm
    # fairseq's own command, its import-time log line included, and a failure's status and message
    real, warm = _both("fairseq-train", "--help")
    assert warm.returncode == real.returncode == 0
    assert TIMESTAMP.sub("", warm.stdout) == TIMESTAMP.sub("", real.stdout) and "usage: fairseq-train" in warm.stdout
    # fairseq was imported in the warm process: the command still logs as it did when it set
    # up logging before importing fairseq (above) and when fairseq's import set it up (here)
    real, warm = _both("fairseq-generate", "--help")
    assert warm.returncode == real.returncode == 0
    assert [TIMESTAMP.sub("", text) for text in (warm.stdout, warm.stderr)] == \
        [TIMESTAMP.sub("", text) for text in (real.stdout, real.stderr)]
    assert "tensorboardX" in warm.stderr and "usage: fairseq-generate" in warm.stdout
    real, warm = _both("fconv-quantize", str(tmp_path / "missing.pt"), str(tmp_path / "out.pt"))
    assert warm.returncode == real.returncode != 0
    assert TIMESTAMP.sub("", warm.stderr) == TIMESTAMP.sub("", real.stderr) and "missing.pt" in warm.stderr


def test_what_the_test_process_sets_as_it_goes_keeps_commands_warm(monkeypatch, tmp_path):
    """fairseq's DataLoader sets PYTHONWARNINGS and torch.compile TORCHINDUCTOR_CACHE_DIR in the
    process that uses them: the commands a test starts afterwards still run warm, and see them."""
    assert warm_commands.wait_until_warm()
    monkeypatch.setenv("PYTHONWARNINGS", "ignore:semaphore_tracker:UserWarning")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    before = len(_forked(str(BIN_DIR / "fconv-info")))
    real, warm = _both("fconv-info")
    assert (warm.returncode, warm.stdout, warm.stderr) == (real.returncode, real.stdout, real.stderr)
    assert len(_forked(str(BIN_DIR / "fconv-info"))) == before + 1


def test_what_changes_the_libraries_start_up_runs_plainly():
    """OMP_NUM_THREADS is read when torch's OpenMP loads, so the warm process cannot honour it."""
    assert warm_commands.wait_until_warm()
    before = len(_forked(str(BIN_DIR / "fconv-info")))
    result = subprocess.run([str(warm_commands.bin_dir() / "fconv-info")], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert "threads: 1 (torch.get_num_threads)" in result.stdout
    assert len(_forked(str(BIN_DIR / "fconv-info"))) == before


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_the_command_reaches_it(trained_model, signum):
    """SIGTERM is passed on to the command, which ends by it; SIGKILL, which cannot be passed
    on, kills the command with the shim: a test's timeout or kill stops its command. Either
    way the shim's status is the real script's: killed by that signal."""
    data_bin, save_dir, _ = trained_model
    assert warm_commands.wait_until_warm()
    command = [str(warm_commands.bin_dir() / "fairseq-interactive"), str(data_bin), "--user-dir", PLUGIN_DIR,
               "--path", str(save_dir / "checkpoint_best.pt")]
    before = set(_forked(str(BIN_DIR / "fairseq-interactive")))
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:  # until it waits for input
        (pid,) = set(_forked(str(BIN_DIR / "fairseq-interactive"))) - before or {None}
        if pid is not None:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(10)  # well into its start-up
    process.send_signal(signum)
    assert process.wait(timeout=60) == -signum
    deadline = time.monotonic() + 10
    while f"warm: {pid} ended with" not in warm_commands.log():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert f"warm: {pid} ended with {-signum}\n" in warm_commands.log()  # SIGKILL: the shim's end killed it
    process.stdout.close()
    process.stdin.close()


def test_command_pid_is_the_process_that_runs_the_command(tmp_path):
    """What a test that SIGKILLs a command at a chosen moment signals (tests/cli/test_interruption.py):
    the forked command where it runs warm, the shim's own process where it runs plainly; either
    way the shim then ends as killed by SIGKILL."""
    assert warm_commands.wait_until_warm()
    script = tmp_path / "waits.py"
    script.write_text("import os, sys\nprint(os.getpid(), flush=True)\nsys.stdin.read()\n")
    for environment, warm in ((os.environ, True), ({**os.environ, "OMP_NUM_THREADS": "1"}, False)):
        process = subprocess.Popen([str(warm_commands.bin_dir() / "python"), str(script)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, env=environment)
        own_pid = int(process.stdout.readline())
        assert (own_pid != process.pid) == warm
        assert warm_commands.command_pid(process.pid) == own_pid
        os.kill(own_pid, signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
        process.stdin.close()
        process.stdout.close()


@pytest.mark.skipif(__import__("fconv_plugin.host_memory").host_memory.tcmalloc_installed() is None,
                    reason="tcmalloc is not installed (apt-get install libtcmalloc-minimal4)")
def test_a_command_started_with_tcmalloc_preloaded_runs_warm_in_a_process_that_tcmalloc_serves():
    """The examples start fairseq-train and their probe with tcmalloc preloaded: a warm process started with it
    runs them (a process's allocator is chosen as it starts), and the command finds tcmalloc serving it."""
    from fconv_plugin import host_memory

    assert warm_commands.wait_until_warm()
    env = {**{k: v for k, v in os.environ.items() if k != host_memory.SWITCH}, "LD_PRELOAD": host_memory.tcmalloc_installed()}
    line = "training memory: fairseq-train on the CPU: " + host_memory.SERVED
    real, _ = _both("fconv-info", env=env)
    assert line in real.stdout.splitlines()
    deadline = time.monotonic() + 120  # the second warm process imports as the first did: until then, commands run plainly
    while True:
        before = len(_forked(str(BIN_DIR / "fconv-info")))
        warm = subprocess.run([str(warm_commands.bin_dir() / "fconv-info")], env=env, capture_output=True, text=True,
                              timeout=300)
        assert warm.returncode == 0 and line in warm.stdout.splitlines(), warm.stdout + warm.stderr
        if len(_forked(str(BIN_DIR / "fconv-info"))) > before or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(_forked(str(BIN_DIR / "fconv-info"))) > before, warm_commands.log()[-2000:]  # it ran warm
