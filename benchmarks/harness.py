"""What every benchmark here shares: its arguments, a trained run to measure, turns taken
side by side, the machine named, and ratios printed.

A benchmark measures on a quickstart run (``examples/bible_es_en/runs/latest``: its
checkpoint, data-bin, BPE codes and test verses), through the plugin's public interfaces
only (``Translator``, the console scripts). ``--quick`` runs the same code on a tiny
run made here in a minute (``quick_run``: the quickstart with a few updates, its own
evaluation skipped), with one repetition, so that a slow test runs every benchmark and
none rots (``tests/benchmarks/test_quick.py``); its figures mean nothing.

Speed is compared only side by side: the forms measured take turns in every repetition,
in an order that alternates, and are reported as medians and ratios to the first.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
QUICKSTART = ROOT / "examples" / "bible_es_en" / "quickstart.sh"
LATEST = ROOT / "examples" / "bible_es_en" / "runs" / "latest"
# --quick: the longest output, in tokens (a quick run's model of 8 updates may never end a sentence)
QUICK_MAX_LEN = 6
# --quick: the side of the products that measure the machine's peak (a few ms each)
QUICK_PEAK_SIZE = 256
if str(ROOT) not in sys.path:  # after PYTHONPATH: a child may measure another checkout of the plugin
    sys.path.append(str(ROOT))


def arguments(description: str, run: bool = True) -> argparse.ArgumentParser:
    """The options every benchmark takes: the run, ``--quick``, ``--repeats``, ``--threads``."""
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    if run:
        parser.add_argument("run", nargs="?", default=str(LATEST),
                            help="a quickstart run directory (default: the latest quickstart run)")
    parser.add_argument("--quick", action="store_true",
                        help="the same code at a tiny size on a run made here (checks that it runs; no figures)")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions (turns) of each measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2, the project's machine)")
    return parser


def parse(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """The parsed arguments; ``--quick`` makes one repetition, and the run a quick one where the
    benchmark takes a run (made once per directory, reused)."""
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = 1
        if hasattr(args, "run"):
            args.run = str(quick_run())
    if hasattr(args, "run"):
        run = Path(args.run).resolve()
        if not (run / "checkpoints" / "checkpoint_best.pt").exists():
            parser.error(f"{run} is not a quickstart run (no checkpoints/checkpoint_best.pt); "
                         f"run bash {QUICKSTART.relative_to(ROOT)} first, or pass --quick")
        args.run = run
    return args


def quick_run(directory: Optional[Path] = None, venv: Optional[Path] = None) -> Path:
    """A quickstart run with 8 updates on 2000 training verses, 40 validation and 40 test verses, and no evaluation
    (``FCONV_QUICK_RUN`` or a directory under the system's temporary one, made once and reused),
    by the commands of ``venv`` (quickstart.sh's ``VENV``; default its own choice)."""
    directory = Path(directory or os.environ.get("FCONV_QUICK_RUN") or Path(tempfile.gettempdir()) / "fconv-quick-run")
    if (directory / "checkpoints" / "checkpoint_best.pt").exists():
        return directory
    if directory.exists() and any(directory.iterdir()):
        raise SystemExit(f"{directory} exists without a finished quick run; delete it or set FCONV_QUICK_RUN")
    env = {**os.environ, "UPDATES": "8", "TRAIN": "2000", "VALID": "40", "TEST": "40", "WORK_DIR": str(directory), "EVALUATE": "0",
           **({"VENV": str(venv)} if venv else {})}
    subprocess.run(["bash", str(QUICKSTART)], check=True, env=env, stdout=subprocess.DEVNULL)
    return directory


def machine() -> str:
    """This machine in one line: CPU, cores, torch's threads, torch; and the date."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, "
            f"torch {torch.__version__}")


def test_lines(run: Path, count: Optional[int] = None) -> List[str]:
    """The run's held-out source verses (raw text), the first ``count``."""
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()
    return lines[:count] if count else lines


def int8_copy(run: Path) -> Path:
    """The run's checkpoint_best.pt quantised by ``fconv-quantize`` (made once, then reused)."""
    int8 = run / "checkpoints" / "checkpoint_int8.pt"
    if not int8.exists():  # the checkpoint names its data-bin relative to the run
        subprocess.run([str(BIN / "fconv-quantize"), str(run / "checkpoints" / "checkpoint_best.pt"), str(int8)],
                       check=True, cwd=run, stdout=subprocess.DEVNULL)
    return int8


def translator(run: Path, checkpoint: Path, beam: int = 5, **options):
    """The inference core over the run's model, with the quickstart's text processing."""
    from fconv_plugin.inference import Translator

    return Translator.from_pretrained(str(checkpoint), str(run / "data-bin"), source_lang="es", target_lang="en",
                                      tokenizer="moses", bpe="subword_nmt", bpe_codes=str(run / "codes"), beam=beam,
                                      **options)


def turns(names: Sequence, repeat: int) -> List:
    """The order the forms take their turn in repetition ``repeat``: alternating, so that
    drift and warm caches hit every form alike."""
    return list(names) if repeat % 2 == 0 else list(reversed(names))


def take_turns(forms: Dict[str, Callable[[], object]], repeats: int) -> Dict[str, List[float]]:
    """Seconds of each form's call, ``repeats`` times, the forms taking turns in an order that alternates."""
    seconds: Dict[str, List[float]] = {name: [] for name in forms}
    for repeat in range(repeats):
        for name in turns(list(forms), repeat):
            start = time.perf_counter()
            forms[name]()
            seconds[name].append(time.perf_counter() - start)
    return seconds


class Child:
    """A benchmark's form in a process of its own (its own environment: ``FCONV_NATIVE``, its
    own peak memory), kept running and asked for one measurement at a time, so that forms in
    several processes still take turns: ``measure()`` sends one line and reads one JSON line.
    Children start side by side (their start-up is not measured); ``ready`` waits for one."""

    def __init__(self, command: Sequence[str], env: Optional[Dict[str, str]] = None):
        self.process = subprocess.Popen([sys.executable, *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env={**os.environ, **(env or {})}, cwd=ROOT)
        self._ready: Optional[dict] = None

    @property
    def ready(self) -> dict:
        """The child's first line, once it has loaded and warmed up."""
        if self._ready is None:
            self._ready = self._answer()
        return self._ready

    def _answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            raise SystemExit(f"a benchmark's child process stopped (status {self.process.returncode})")
        return json.loads(line)

    def measure(self) -> dict:
        self.process.stdin.write("measure\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def take_turns_in_children(children: Dict[object, "Child"], repeats: int):
    """``take_turns`` for forms in processes of their own: each child's reported ``seconds``,
    ``repeats`` times in alternating order, and its last answer; the children closed after."""
    seconds: Dict[object, List[float]] = {key: [] for key in children}
    answers: Dict[object, dict] = {}
    for child in children.values():  # every child loaded before any measures: none measures beside a start-up
        child.ready
    for repeat in range(repeats):
        for key in turns(list(children), repeat):
            answers[key] = children[key].measure()
            seconds[key].append(answers[key]["seconds"])
    for child in children.values():
        child.close()
    return seconds, answers


def serve_measurements(ready: dict, measure: Callable[[], dict]) -> None:
    """A ``Child``'s side: say ``ready``, then answer each line of stdin with ``measure()``."""
    print(json.dumps(ready), flush=True)
    for _ in sys.stdin:
        print(json.dumps(measure()), flush=True)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float]) -> float:
    """(max - min) / median of repeated measurements."""
    return (max(values) - min(values)) / statistics.median(values)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table, as docs/performance.md shows the figures."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
