"""Training on the CPU reuses freed memory for large tensors (fconv_plugin/host_memory.py).

What is counted is the kernel's own count of page faults (``ru_minflt``), not time: a tensor
of 64 MB touched again after it was freed faults its pages in afresh where malloc handed them
back, and not at all where they were kept. Each case runs in a process of its own, since the
setting is the process's."""

import json
import os
import subprocess
import sys

import pytest

from fconv_plugin import host_memory
from fconv_plugin.errors import FConvError
from tests.tasks import PLUGIN_DIR, SMALL_MODEL, run_tool

KEPT = "freed memory is kept for reuse by tensors up to 1024 MB (glibc mallopt; FCONV_ALLOCATOR=system turns this off)"
TCMALLOC = host_memory.tcmalloc_installed()  # Debian's libtcmalloc-minimal4 (.ci/run installs it)
# what fairseq-train says where glibc serves it and tcmalloc is installed (FCONV_ALLOCATOR unset): how to start it faster
KEPT_HERE = KEPT + (f"; faster: LD_PRELOAD={TCMALLOC} (tcmalloc, installed here)" if TCMALLOC else "")
SERVED = "tcmalloc serves this process (preloaded): freed memory is reused by size, nothing to set"
needs_tcmalloc = pytest.mark.skipif(TCMALLOC is None, reason="tcmalloc is not installed (apt-get install libtcmalloc-minimal4)")
NOT_GLIBC = "the C library is not glibc: large tensors get new pages at every step (nothing set)"
PAGES = (64 << 20) // os.sysconf("SC_PAGE_SIZE")  # of one 64 MB tensor
STEPS = 12
GROWN_BY = 6  # steps: the heap has grown to hold the tensor by then (measured: by the fourth)

FAULTS = f"""
import json, resource, torch
from fconv_plugin import host_memory
kept_before = host_memory.keeps_freed_memory()
said = host_memory.keep_freed_memory()
kept = [kept_before, host_memory.keeps_freed_memory()]
faults = []
for _ in range({STEPS}):  # as training steps: a large tensor made, filled, freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    tensor = torch.empty(16 << 20)  # 64 MB of float32
    tensor.fill_(1.0)
    del tensor
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps([said, kept, faults]))
"""


def _clean_environment(**env):
    """This process's environment without what else decides malloc's behaviour (its own variables,
    glibc's tunables, a preloaded allocator) or the plugin's switch, plus ``env``."""
    return {**{k: v for k, v in os.environ.items()
               if k not in (host_memory.SWITCH, "GLIBC_TUNABLES", "LD_PRELOAD", "THP_MEM_ALLOC_ENABLE")
               and not k.startswith("MALLOC_")}, **env}


def _faults(**env):
    result = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True, timeout=120, check=True,
                            env=_clean_environment(**env))
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.skipif(host_memory.glibc() is None, reason="not glibc: nothing to set (test_describe covers the words)")
def test_a_large_tensor_made_again_reuses_the_pages_freed_before():
    said, keeps, kept = _faults()
    if said.startswith("glibc refused"):
        pytest.skip(f"this glibc refuses the thresholds, and training says so: {said}")
    assert said == KEPT_HERE
    assert keeps == [False, True]  # what fairseq-train's epochs ask before handing free pages back
    said_system, keeps_system, system = _faults(FCONV_ALLOCATOR="system")
    assert said_system.startswith("FCONV_ALLOCATOR=system: malloc as the C library sets it")
    assert keeps_system == [False, False]
    # The heap grows the first time, and again while the small allocations made between steps take
    # part of a freed tensor's hole (a 64-byte-aligned 64 MB request then no longer fits it): in 130
    # runs of 12 steps (100 idle, 30 beside a CPU-bound process a core) it grew twice (81) or three
    # times (49), the last time at the second to the fourth step (2026-12-02, 2-core AMD EPYC, glibc
    # 2.36; the old bound, grown by the second step, failed 6 of 20 runs); once grown, a step's tensor gets
    # the pages a step before it freed (the second half of 12 steps is checked)
    steady = max(kept[GROWN_BY:])
    assert kept[0] > 10 * max(steady, 1), kept  # the first time: its pages fault in once (4 KB or huge ones)
    assert steady < PAGES * 0.05, kept
    # without it, glibc maps and unmaps 64 MB (above its 32 MB ceiling) every time: each 4 KB
    # page faults in, or each 2 MB one where transparent huge pages are "always"
    assert min(system[GROWN_BY:]) > 10 * max(steady, 1), system


RESIDENT = """
import json, torch
from fconv_plugin import host_memory
def resident_mb():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024
host_memory.keep_freed_memory()
tensor = torch.empty(64 << 20)  # 256 MB of float32, touched, then freed: kept for reuse
tensor.fill_(1.0)
del tensor
kept = resident_mb()
returned = host_memory.return_freed_memory()
print(json.dumps([kept, resident_mb(), returned]))
"""


@pytest.mark.skipif(host_memory.glibc() is None, reason="not glibc: nothing is kept, nothing to return")
def test_the_memory_kept_for_reuse_goes_back_to_the_kernel_when_asked():
    result = subprocess.run([sys.executable, "-c", RESIDENT], capture_output=True, text=True, timeout=120, check=True,
                            env=_clean_environment())
    kept, after, returned = json.loads(result.stdout.splitlines()[-1])
    assert returned is True
    assert kept - after >= 200, (kept, after)  # the 256 MB freed were still resident until then


def test_a_setting_other_than_reuse_or_system_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv(host_memory.SWITCH, "jemalloc")
    with pytest.raises(FConvError) as refused:
        host_memory.keep_freed_memory()
    assert str(refused.value) == ("FCONV_ALLOCATOR must be one of auto, tcmalloc, reuse, system, got 'jemalloc'; "
                                  "unset it to let training reuse freed memory")
    assert host_memory.describe() == f"refused: {refused.value}"
    monkeypatch.setenv(host_memory.SWITCH, " System ")
    assert host_memory.setting() == "system"
    monkeypatch.setenv(host_memory.SWITCH, "")
    assert host_memory.setting() == "auto"


def test_fconv_info_says_what_fairseq_train_does_here():
    result = subprocess.run([sys.executable, "-m", "fconv_plugin.cli.info"], capture_output=True, text=True, timeout=120,
                            check=True, env=_clean_environment())
    lines = [line for line in result.stdout.splitlines() if line.startswith("training memory: ")]
    assert len(lines) == 1
    said = lines[0][len("training memory: fairseq-train on the CPU: "):]
    missing = "" if TCMALLOC else "; faster: tcmalloc (libtcmalloc-minimal4), not installed"
    assert said in (KEPT_HERE + missing, NOT_GLIBC + missing) or said.startswith("glibc refused the thresholds"), lines
    assert said.startswith(NOT_GLIBC) == (host_memory.glibc() is None)
    system = subprocess.run([sys.executable, "-m", "fconv_plugin.cli.info"], capture_output=True, text=True, timeout=120,
                            check=True, env=_clean_environment(FCONV_ALLOCATOR="system")).stdout
    assert ("training memory: fairseq-train on the CPU: FCONV_ALLOCATOR=system: malloc as the C library sets it "
            "(large tensors get new pages at every step)") in system.splitlines()


def test_a_c_library_that_is_not_glibc_is_named_and_nothing_is_set(monkeypatch):
    monkeypatch.delenv(host_memory.SWITCH, raising=False)
    monkeypatch.setattr(host_memory, "glibc", lambda: None)  # a musl or macOS host
    monkeypatch.setattr(host_memory, "_glibc_heap_kept", False)  # as in a fresh process (this one may have trained)
    assert host_memory.keep_freed_memory() == NOT_GLIBC
    assert host_memory.keeps_freed_memory() is False


class _GlibcAnswering:
    """A glibc whose ``mallopt`` answers ``answer`` (1: took the threshold; 0: refused it)."""

    def __init__(self, answer):
        self.answer = answer

    def mallopt(self, option, value):
        return self.answer


@pytest.mark.parametrize("answer,keeps", [(1, True), (0, False)])
def test_the_process_keeps_freed_memory_only_where_glibc_took_the_thresholds(monkeypatch, answer, keeps):
    monkeypatch.delenv(host_memory.SWITCH, raising=False)
    monkeypatch.setattr(host_memory, "tcmalloc_serves", lambda: False)
    monkeypatch.setattr(host_memory, "glibc", lambda: _GlibcAnswering(answer))
    monkeypatch.setattr(host_memory, "_glibc_heap_kept", False)  # as in a fresh process (this one may have trained)
    said = host_memory.keep_freed_memory()
    assert host_memory.keeps_freed_memory() is keeps
    if keeps:
        assert said == KEPT_HERE
    else:  # the refusal alone: no advice to start faster, nothing kept
        assert said == "glibc refused the thresholds (mallopt): large tensors get new pages at every step"


def test_a_refusal_after_an_earlier_setting_took_says_the_refusal_alone_and_the_process_still_keeps(monkeypatch):
    """Advice to start faster follows this call's own outcome, not the process's earlier one; the
    thresholds an earlier call set still stand."""
    monkeypatch.delenv(host_memory.SWITCH, raising=False)
    monkeypatch.setattr(host_memory, "tcmalloc_serves", lambda: False)
    monkeypatch.setattr(host_memory, "_glibc_heap_kept", False)
    monkeypatch.setattr(host_memory, "glibc", lambda: _GlibcAnswering(1))
    assert host_memory.keep_freed_memory() == KEPT_HERE
    monkeypatch.setattr(host_memory, "glibc", lambda: _GlibcAnswering(0))
    assert host_memory.keep_freed_memory() == "glibc refused the thresholds (mallopt): large tensors get new pages at every step"
    assert host_memory.keeps_freed_memory() is True


@pytest.mark.slow
def test_fairseq_train_on_the_cpu_says_it_reuses_freed_memory(word_task, tmp_path):
    _, data_bin = word_task
    result = run_tool("fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, "--cpu", "--optimizer", "adam",
                      "--lr", "0.001", "--max-tokens", "300", "--max-update", "2", "--no-save", "--save-dir", str(tmp_path),
                      "--disable-validation",
                      "--log-format", "simple", env=_clean_environment())
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "fconv_plugin: training on the CPU:" in line]
    assert len(lines) == 1, lines
    said = lines[0].split("training on the CPU: ", 1)[1]
    if host_memory.glibc() is None:
        assert said == NOT_GLIBC
    else:  # a glibc that refuses the thresholds says so in the log
        assert said == KEPT_HERE or said.startswith("glibc refused the thresholds (mallopt)"), said


@needs_tcmalloc
@pytest.mark.slow
def test_fairseq_train_started_with_tcmalloc_says_so_and_trains(word_task, tmp_path):
    _, data_bin = word_task
    result = run_tool("fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, "--cpu", "--optimizer", "adam",
                      "--lr", "0.001", "--max-tokens", "300", "--max-epoch", "2", "--no-save", "--save-dir", str(tmp_path),
                      "--disable-validation",
                      "--log-format", "simple", env=_clean_environment(LD_PRELOAD=TCMALLOC))
    text = result.stdout + result.stderr
    assert [line.split("training on the CPU: ", 1)[1] for line in text.splitlines()
            if "fconv_plugin: training on the CPU:" in line] == [SERVED]
    assert "done training" in text  # two epochs: the second begins by handing tcmalloc's free pages back


@pytest.mark.slow
def test_training_in_process_returns_the_free_pages_as_each_later_epoch_begins(word_task, tmp_path, monkeypatch):
    from fairseq import options
    from fairseq_cli import train

    from tests.tasks import PAPER_OPTIMIZER

    import fconv_plugin.compat

    fconv_plugin.compat.install()
    _, data_bin = word_task
    epochs_asked = []
    return_freed_memory = host_memory.return_freed_memory

    def counted():  # the real call, counted
        epochs_asked.append(return_freed_memory())
        return epochs_asked[-1]

    monkeypatch.setattr(host_memory, "return_freed_memory", counted)
    monkeypatch.delenv(host_memory.SWITCH, raising=False)
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data_bin), "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER, "--cpu", "--max-tokens", "300",
        "--max-epoch", "3", "--save-dir", str(tmp_path), "--no-save", "--disable-validation", "--no-progress-bar",
        "--num-workers", "0", "--seed", "1"])
    train.main(args)
    assert len(epochs_asked) == 2  # as epochs 2 and 3 begin, not the first


SERVES = """
import json, resource, torch
from fconv_plugin import host_memory
def resident_mb():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024
kept_before = host_memory.keeps_freed_memory()  # tcmalloc keeps it from the start, nothing asked
said = host_memory.keep_freed_memory()
faults = []
for _ in range(%d):  # as training steps: a large tensor made, filled, freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    tensor = torch.empty(16 << 20)  # 64 MB of float32
    tensor.fill_(1.0)
    del tensor
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
kept = resident_mb()
returned = host_memory.return_freed_memory()
print(json.dumps([host_memory.tcmalloc_serves(), kept_before, said, faults, kept, resident_mb(), returned]))
""" % STEPS


@needs_tcmalloc
def test_tcmalloc_preloaded_is_found_reuses_a_large_tensors_pages_and_gives_them_back_when_asked():
    def child(**env):
        result = subprocess.run([sys.executable, "-c", SERVES], capture_output=True, text=True, timeout=120,
                                check=True, env=_clean_environment(**env))
        return json.loads(result.stdout.splitlines()[-1])

    serves, kept_before, said, faults, kept, after, returned = child(LD_PRELOAD=TCMALLOC)
    assert (serves, kept_before, said, returned) == (True, True, SERVED, True)
    steady = max(faults[GROWN_BY:])
    assert faults[0] > 10 * max(steady, 1), faults  # the first time, the tensor's pages fault in (4 KB or huge ones)
    assert steady < PAGES * 0.05, faults  # then a step's tensor gets the pages the last one freed
    assert kept - after >= 40, (kept, after)  # the freed 64 MB were resident until tcmalloc was asked to release them
    glibc_serves, glibc_kept_before, glibc_said, *_ = child()
    assert glibc_serves is False and glibc_kept_before is False and glibc_said != SERVED


def test_the_examples_preload_tcmalloc_where_installed_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv(host_memory.SWITCH, raising=False)
    assert host_memory.training_preload() == TCMALLOC  # None where it is not installed
    for glibc_setting in ("reuse", "system"):
        monkeypatch.setenv(host_memory.SWITCH, glibc_setting)
        assert host_memory.training_preload() is None
    monkeypatch.setenv(host_memory.SWITCH, "tcmalloc")
    monkeypatch.setattr(host_memory, "tcmalloc_installed", lambda: None)  # a host without the package
    with pytest.raises(FConvError) as refused:
        host_memory.training_preload()
    assert str(refused.value) == ("FCONV_ALLOCATOR=tcmalloc, but tcmalloc (libtcmalloc_minimal.so) is not installed: "
                                  "install it (apt-get install libtcmalloc-minimal4) or unset FCONV_ALLOCATOR")


@pytest.mark.skipif(host_memory.glibc() is None, reason="not glibc: nothing is kept (test_describe covers the words)")
def test_tcmalloc_asked_of_a_process_started_without_it_keeps_glibcs_heap_and_says_how_to_start_it():
    result = subprocess.run([sys.executable, "-c", "from fconv_plugin import host_memory; print(host_memory.keep_freed_memory())"],
                            capture_output=True, text=True, timeout=120, check=True,
                            env=_clean_environment(FCONV_ALLOCATOR="tcmalloc"))
    how = (f"started without it (LD_PRELOAD={TCMALLOC}, as the examples start fairseq-train)" if TCMALLOC
           else "tcmalloc is not installed (apt-get install libtcmalloc-minimal4)")
    said = result.stdout.splitlines()[-1]
    assert said == f"FCONV_ALLOCATOR=tcmalloc, but {how}: {KEPT}" or "glibc refused the thresholds" in said, said


def test_tcmalloc_is_looked_for_only_where_ld_preload_works(monkeypatch):
    monkeypatch.delenv(host_memory.SWITCH, raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")  # a Homebrew .dylib would be found, and LD_PRELOAD ignored
    assert host_memory.tcmalloc_installed() is None and host_memory.training_preload() is None


def test_the_module_prints_the_library_the_examples_preload():
    run = lambda **env: subprocess.run([sys.executable, "-m", "fconv_plugin.host_memory"], capture_output=True,  # noqa: E731
                                       text=True, timeout=120, env=_clean_environment(**env))
    assert run().stdout == f"{TCMALLOC or ''}\tauto\n"
    assert run(FCONV_ALLOCATOR=" Reuse ").stdout == "\treuse\n"
    refused = run(FCONV_ALLOCATOR="bogus")
    assert refused.returncode == 1 and refused.stderr.startswith("error: FCONV_ALLOCATOR must be one of")
