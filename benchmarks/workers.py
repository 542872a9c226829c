"""One process against decoding workers (``translate(workers=N)``, ``fconv-translate --workers``).

A trained run's model, float32 and its fconv-quantize int8 copy, translates the run's test
verses (raw text: Moses and BPE included, as fconv-translate does) at beam 5, in one
process with torch's threads and in N workers of one thread, with fconv-translate's
default batches (4,000 tokens; shared out by the workers) and in batches of 16 sentences.
The forms take turns in every repetition, in one process; reported: median sentences/s,
workers / one process, and whether the translations were the same.

    python benchmarks/workers.py examples/bible_es_en/runs/latest [--workers 2] [--repeats 3]
"""

import argparse
import logging
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from load_test import int8_copy  # noqa: E402  the load test's int8 copy of the run's model

from fconv_plugin.inference import Translator  # noqa: E402

BATCHES = {"default batches": {}, "batches of 16": {"max_sentences": 16}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    run = args.run.resolve()
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()
    options = dict(source_lang="es", target_lang="en", tokenizer="moses", bpe="subword_nmt", bpe_codes=str(run / "codes"))
    translators = {"float32": Translator.from_pretrained(run / "checkpoints" / "checkpoint_best.pt", run / "data-bin", **options),
                   "int8": Translator.from_pretrained(int8_copy(run), run / "data-bin", **options)}
    print(f"{len(lines)} verses, beam 5, one process of {torch.get_num_threads()} threads against {args.workers} workers "
          f"of one thread, median of {args.repeats}:")
    for precision, translator in translators.items():
        for batches, bounds in BATCHES.items():
            times = {1: [], args.workers: []}
            texts = {}
            for workers in times:
                translator.translate(lines[:200], beam=5, workers=workers, **bounds)  # warm-up (every worker's start)
            for repeat in range(args.repeats):
                for workers in (times if repeat % 2 == 0 else reversed(list(times))):
                    start = time.perf_counter()
                    results = translator.translate(lines, beam=5, workers=workers, **bounds)
                    times[workers].append(time.perf_counter() - start)
                    texts[workers] = [r.best.text for r in results]
            rates = {w: len(lines) / statistics.median(t) for w, t in times.items()}
            same = sum(a == b for a, b in zip(texts[1], texts[args.workers]))
            print(f"  {precision:7s} {batches:15s} one process {rates[1]:6.1f}, {args.workers} workers "
                  f"{rates[args.workers]:6.1f} sentences/s: {rates[args.workers] / rates[1]:.2f}x; "
                  f"{same} of {len(lines)} translations the same")
        translator.close()


if __name__ == "__main__":
    main()
