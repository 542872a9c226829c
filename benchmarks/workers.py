"""One process against decoding workers (``translate(workers=N)``, ``fconv-translate --workers``)
and against N threads sharing one translator.

A trained run's model, float32 and its fconv-quantize int8 copy, translates the run's test
verses (raw text: Moses and BPE included, as fconv-translate does) at beam 5: in one
process with torch's threads; in N workers of one thread; and in N Python threads of this
process, each translating every N-th verse with torch at one thread (what a server's
threads do; the compiled step and books run without the GIL). With fconv-translate's
default batches (4,000 tokens; shared out by the workers and threads) and in batches of
16 sentences. The forms take turns in every repetition, in one process; reported: median
sentences/s, each form / one process, and whether the translations were the same.

    python benchmarks/workers.py examples/bible_es_en/runs/latest [--workers 2] [--repeats 3]
"""

import argparse
import logging
import statistics
import sys
import threading
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


def in_threads(translator, lines, threads: int, **options):
    """``lines`` translated by ``threads`` Python threads sharing ``translator``, each every
    threads-th line, torch at one thread meanwhile; the results in the lines' order."""
    results = [None] * len(lines)

    def translate(first):
        for index, result in zip(range(first, len(lines), threads),
                                 translator.translate(lines[first::threads], **options)):
            results[index] = result

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        running = [threading.Thread(target=translate, args=(first,)) for first in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
    finally:
        torch.set_num_threads(before)
    return results


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
    n = args.workers
    print(f"{len(lines)} verses, beam 5, one process of {torch.get_num_threads()} threads against {n} workers "
          f"of one thread and {n} threads of one torch thread, median of {args.repeats}:")
    for precision, translator in translators.items():
        for batches, bounds in BATCHES.items():
            forms = {
                "one process": lambda: translator.translate(lines, beam=5, **bounds),
                f"{n} workers": lambda: translator.translate(lines, beam=5, workers=n, **bounds),
                f"{n} threads": lambda: in_threads(translator, lines, n, beam=5, **bounds),
            }
            times = {form: [] for form in forms}
            texts = {}
            for workers in (1, n):
                translator.translate(lines[:200], beam=5, workers=workers, **bounds)  # warm-up (every worker's start)
            for repeat in range(args.repeats):
                for form in (list(forms) if repeat % 2 == 0 else list(reversed(forms))):
                    start = time.perf_counter()
                    results = forms[form]()
                    times[form].append(time.perf_counter() - start)
                    texts[form] = [r.best.text for r in results]
            rates = {form: len(lines) / statistics.median(t) for form, t in times.items()}
            cells = ", ".join(f"{form} {rates[form]:6.1f} ({rates[form] / rates['one process']:.2f}x, "
                              f"{sum(a == b for a, b in zip(texts['one process'], texts[form]))} the same)"
                              for form in list(forms)[1:])
            print(f"  {precision:7s} {batches:15s} sentences/s: one process {rates['one process']:6.1f}, {cells}")
        translator.close()


if __name__ == "__main__":
    main()
