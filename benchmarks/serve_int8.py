"""Why fconv-serve's generation was slow, int8 most: which thread loads and runs the models.

fconv-serve generates in one worker thread. The inference core's translate is timed for
float32 and int8, in calls of the size the server makes, in three settings, each in a
fresh process (once a second thread has run torch, the first's OpenMP team stays):

- main thread: load and generate in the main thread (fairseq-generate's case);
- worker, loaded in main: load in the main thread, generate in a worker thread
  (fconv-serve before 2026-11-25);
- worker, loaded there: load and generate in the worker thread (fconv-serve now).

    python benchmarks/serve_int8.py examples/bible_es_en/runs/latest [--sentences 128] [--call 32]

Reported: the median of 3 passes over the sentences, sentences/s, and int8/float32.
"""

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from load_test import int8_copy  # noqa: E402  the load test's int8 copy of the run's model

SETTINGS = ("main thread", "worker, loaded in main", "worker, loaded there")


def measure(run: Path, weights: str, setting: str, sentences: int, call: int) -> float:
    """Sentences/s in this process for one setting (run by main() in a fresh process)."""
    from int8_speed import translator as run_translator  # the run's model with its Moses and BPE, beam 5

    checkpoint = int8_copy(run) if weights == "int8" else run / "checkpoints" / "checkpoint_best.pt"

    def load():
        return run_translator(run, checkpoint)

    worker = ThreadPoolExecutor(max_workers=1)
    translator = worker.submit(load).result() if setting == "worker, loaded there" else load()
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()[:sentences]
    encoded = [translator.encode(line) for line in lines]

    def passes():
        translator.translate(lines[:16])  # warm-up
        rates = []
        for _ in range(3):
            start = time.perf_counter()
            for i in range(0, len(lines), call):
                translator.translate(lines[i:i + call], encoded=encoded[i:i + call])
            rates.append(len(lines) / (time.perf_counter() - start))
        return statistics.median(rates)

    return passes() if setting == "main thread" else worker.submit(passes).result()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--call", type=int, default=32, help="sentences a generation call")
    parser.add_argument("--measure", nargs=2, metavar=("WEIGHTS", "SETTING"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    run = Path(args.run).resolve()
    if args.measure:
        print(f"RATE {measure(run, args.measure[0], args.measure[1], args.sentences, args.call):.2f}")
        return
    int8_copy(run)
    print(f"{args.sentences} test verses, beam 5, calls of {args.call}; each setting in a fresh process")
    for setting in SETTINGS:
        rates = {}
        for weights in ("float32", "int8"):
            result = subprocess.run([sys.executable, __file__, str(run), "--sentences", str(args.sentences), "--call",
                                     str(args.call), "--measure", weights, setting], capture_output=True, text=True,
                                    check=True)
            rates[weights] = float(next(line for line in result.stdout.splitlines() if line.startswith("RATE")).split()[1])
        print(f"{setting:24s} float32 {rates['float32']:6.1f}/s  int8 {rates['int8']:6.1f}/s  "
              f"int8/float32 {rates['int8'] / rates['float32']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
