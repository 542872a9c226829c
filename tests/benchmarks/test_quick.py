"""Every benchmark runs: its ``--quick`` mode (the same code at a tiny size, on a quickstart
run of a few updates made once here), so that none rots between the runs that measure."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from fconv_plugin import host_memory
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
    if name == "training_limits.py":  # part 6's candidate is checked against torch's own gradient in the run
        assert re.search(r"^6\. the loss over the vocabulary .*\n.*\(the chunks' gradients equal torch's\), taking turns: "
                         r"torch's [\d.]+ ms \(1\.00x\), in row chunks [\d.]+ ms", result.stdout, flags=re.M), result.stdout


def test_the_bf16_profile_runs_where_the_cpu_has_the_units_and_is_refused_in_one_line_elsewhere():
    from fconv_plugin import precision

    result = subprocess.run([str(warm_commands.bin_dir() / "python"), str(ROOT / "benchmarks" / "training_limits.py"),
                             "--quick", "--bf16", "--kernels"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    if precision.bf16_units() is None:
        assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].endswith(
            "--bf16 on the CPU needs bfloat16 units (AMX-BF16 or AVX-512 BF16) and this CPU has none (bfloat16 would run "
            "many times slower than float32 here); drop --bf16 to run in float32"), result.stderr
        return
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = {line.strip().split("  ")[0]: line for line in result.stdout.splitlines() if line.startswith("     ")}
    parts = [part for part in rows if part in ("matrix products (convolution taps, linear layers, attention)",
                                               "dropout (its random mask and scaling)", "the whole step")]
    assert len(parts) == 3, result.stdout
    # each row: float32 ms | bfloat16 ms | their ratio | bfloat16's share, the ratio the two times' own
    fp32, bf16, ratio = re.search(r"([\d.]+) \|\s+([\d.]+) \|\s+([\d.]+)x", rows["the whole step"]).groups()
    assert abs(float(fp32) / float(bf16) - float(ratio)) < 0.01 * float(ratio) + 0.006
    assert "torch.bfloat16" in result.stdout  # parts 2 and 3 ran in bfloat16
    # part 7: both fused loss paths compiled here, their gradients checked against torch's in the run, the steps timed
    seven = re.search(r"^7\. the training step with Adam, the loss over the vocabulary three ways .*taking turns: "
                      r"torch's ([\d.]+) ms, log-softmax fused ([\d.]+) ms \(([\d.]+)x\), loss fused ([\d.]+) ms "
                      r"\(([\d.]+)x\)$", result.stdout, flags=re.M)
    assert seven, result.stdout
    torch_ms, softmax_ms, softmax_ratio, loss_ms, loss_ratio = (float(x) for x in seven.groups())
    for ms, ratio in ((softmax_ms, softmax_ratio), (loss_ms, loss_ratio)):  # each ratio its two times' own,
        rounding = ratio * (0.05 / torch_ms + 0.05 / ms) + 0.0005  # within the printed figures' rounding
        assert min(torch_ms, ms) > 0 and abs(torch_ms / ms - ratio) <= rounding
    # part 0: the libraries' own logs name the kernels; bfloat16's products run in oneDNN on bfloat16 units
    census = result.stdout.split("0. bfloat16 step", 1)[1].split("1. profile", 1)[0]
    assert re.search(r"oneDNN +matmul \S+:(avx512_core_bf16|avx512_core_amx\S*|avx10\S*) ", census), census
    shares = [float(share) for share in re.findall(r"ms +([\d.]+)%$", census, flags=re.M)]
    assert shares and 0 < shares[-1] <= 100 and sum(shares[:-1]) <= shares[-1] + 0.1 * len(shares)  # the largest 8, all


def test_a_vocabulary_the_step_cannot_take_is_refused_in_one_line():
    limits = [str(warm_commands.bin_dir() / "python"), str(ROOT / "benchmarks" / "training_limits.py")]
    for wrong, said in (
            (["--vocabulary", "4"], "--vocabulary takes 5 words or more (fairseq's dictionary holds 4 special symbols, "
                                    "and the batch draws its words from the rest)"),
            (["--vocabulary", "9000", "--precision"], "--vocabulary sets the step's batch of parts 0-7; --precision "
                                                      "trains on a run's data-bin, whose dictionary decides: drop --vocabulary")):
        refused = subprocess.run([*limits, *wrong], cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1].endswith(said), (wrong, refused.stderr)


def test_the_float32_accumulation_patch_still_applies_as_docs_performance_md_says():
    """docs/performance.md decides float32 accumulation by runs with this patch applied; it must
    still apply to the model, or the page's command no longer reruns them."""
    patch = ROOT / "benchmarks" / "float32_accumulation.patch"
    result = subprocess.run(["git", "apply", "--check", "--verbose", str(patch)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    touched = set(re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), flags=re.M))
    assert touched == {"fconv_plugin/modules/conv_block.py", "fconv_plugin/modules/weight_norm.py"}, touched
    assert "benchmarks/float32_accumulation.patch" in (ROOT / "docs" / "performance.md").read_text()


@pytest.mark.parametrize("flag", [
    "--allocator",  # FCONV_ALLOCATOR=system against reuse
    pytest.param("--tcmalloc", marks=pytest.mark.skipif(  # reuse against tcmalloc, preloaded
        host_memory.tcmalloc_installed() is None, reason="tcmalloc is not installed (apt-get install libtcmalloc-minimal4)")),
])
def test_an_allocator_comparison_runs_fairseq_train_both_ways(quickstart_run, flag):
    result = subprocess.run([str(warm_commands.bin_dir() / "python"), str(ROOT / "benchmarks" / "training_limits.py"),
                             "--quick", flag], cwd=ROOT, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "FCONV_QUICK_RUN": str(quickstart_run)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = re.findall(r"^     (float32|bfloat16): words/s (\d+) -> (\d+) \(([\d.]+)x\); peak resident memory (\d+) -> (\d+) MB",
                      result.stdout, flags=re.M)
    from fconv_plugin import precision

    assert [row[0] for row in rows] == ["float32"] + (["bfloat16"] if precision.bf16_units() else []), result.stdout
    # every child logged the setting it was measured under (the benchmark refuses a run that did not): both ran and trained
    for _, before, after, _, peak_before, peak_after in rows:
        assert min(int(before), int(after), int(peak_before), int(peak_after)) > 0, result.stdout


# the bfloat16-only comparisons: (flag, the refusal's start on a CPU without the units, the title they print);
# each child logged the setting it was measured under and not the other's (the benchmark refuses it otherwise)
BF16_COMPARISONS = [
    pytest.param("--dropout", "FCONV_DROPOUT sets bfloat16's training; this CPU has no bfloat16 units",
                 "FCONV_DROPOUT=torch (torch's Bernoulli draws) against 16bit (16-bit draws)", id="dropout"),
    pytest.param("--precision", "--bf16 sets bfloat16's training; this CPU has no bfloat16 units",
                 "float32 against --bf16 (bfloat16 products, float32 weights)", id="precision"),
]


@pytest.mark.parametrize("flag,refusal,title", BF16_COMPARISONS)
def test_a_bf16_comparison_runs_fairseq_train_both_ways_where_the_cpu_has_the_units(quickstart_run, flag, refusal, title):
    from fconv_plugin import precision

    result = subprocess.run([str(warm_commands.bin_dir() / "python"), str(ROOT / "benchmarks" / "training_limits.py"),
                             "--quick", flag], cwd=ROOT, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "FCONV_QUICK_RUN": str(quickstart_run)})
    if precision.bf16_units() is None:
        assert result.returncode != 0
        assert result.stderr.strip().splitlines()[-1].startswith(refusal)
        return
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = re.findall(r"^     (bfloat16): words/s (\d+) -> (\d+) \(([\d.]+)x\); peak resident memory (\d+) -> (\d+) MB",
                      result.stdout, flags=re.M)
    assert len(rows) == 1 and min(int(value) for value in rows[0][1:3] + rows[0][4:]) > 0, result.stdout
    assert title in result.stdout


def test_the_machines_pace_times_the_same_step_in_windows_and_summarises_them():
    """Part 8 (``--pace``): each window's ms a step printed, and the summary made of those windows
    (tests/benchmarks/test_training_limits.py checks the summary's arithmetic on a hand-made case)."""
    limits = [str(warm_commands.bin_dir() / "python"), str(ROOT / "benchmarks" / "training_limits.py")]
    result = subprocess.run([*limits, "--quick", "--pace"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    windows = re.search(r"^8\. the machine's pace: the same step, (\d+) windows of 1 s over (\d+) s, ms a step: ([\d ]+)$",
                        result.stdout, flags=re.M)
    assert windows, result.stdout
    step_ms = [int(ms) for ms in windows.group(3).split()]
    # --quick: windows of a second or more (each at least one step) while 3 s have not passed: one to three
    assert 1 <= len(step_ms) == int(windows.group(1)) <= 3 and min(step_ms) > 0
    assert int(windows.group(2)) >= 3  # the seconds it ran: windows open until 3 s have passed
    fastest, median, slowest = (float(x) for x in re.search(
        r"^   fastest ([\d.]+), median ([\d.]+), slowest ([\d.]+) \(", result.stdout, flags=re.M).groups())
    assert abs(fastest - min(step_ms)) <= 0.5 and abs(slowest - max(step_ms)) <= 0.5 and fastest <= median <= slowest
    for wrong, said in ((["--pace", "0"], "--pace takes the seconds to measure for, 10 (one window) or more"),
                        (["--pace", "nan"], "--pace takes the seconds to measure for, 10 (one window) or more"),
                        (["--pace", "--tcmalloc", "--kernels"], "--pace runs alone: drop --tcmalloc and --kernels, or run them apart")):
        refused = subprocess.run([*limits, *wrong], cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1].endswith(said), (wrong, refused.stderr)
