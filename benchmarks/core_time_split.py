"""Where the inference core's own beam search spends a translation's time, part by part.

On a trained run's model (the quickstart's), the core (``Translator.translate``) translates
the test verses at beam 5 in calls of 16, float32 and fconv-quantize's int8 taking turns,
with ``--threads`` torch threads (1: what each of ``translate(workers=2)``'s processes
runs). Each part's time is summed around its calls:

- the encoder;
- the decoder's steps (the compiled ``Decoding.log_probs``: the embeddings, then the step
  from the first layer to the log-softmax; ``DecoderSteps.log_probs`` where Python calls it);
- the candidates and the bookkeeping between steps (``beam_candidates.cpp``'s
  ``Bookkeeping``: the step's rules and each sentence's 2 x beam best, split into finished
  hypotheses and the next beam, sentences leaving; in ``run_steps``, its time less the
  decoder's steps and reorderings it calls);
- the state's reordering between steps;
- the rest of the search: its own Python between these calls;
- outside the search: batching, the dictionary, results.

``run_steps`` calls the decoding through a Python wrapper here (a few microseconds a step
that an untimed search does not spend). The verses are Moses-tokenised and BPE-split before
the clock starts. Reported: each
part's median seconds over the repetitions and its share of the whole call.

    .venv/bin/python benchmarks/core_time_split.py examples/bible_es_en/runs/latest [--threads 1] [--repeats 3]
"""

import argparse
import functools
import logging
import statistics
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from load_test import int8_copy  # noqa: E402  the load test's int8 copy of the run's model
from vs_ctranslate2 import text_tools  # noqa: E402  Moses and BPE as the quickstart applies them

from fconv_plugin.inference import Translator  # noqa: E402
from fconv_plugin.inference import beam_search  # noqa: E402
from fconv_plugin.models.decoder_steps import DecoderSteps  # noqa: E402

BEAM, CALL = 5, 16
PARTS = ("encoder", "decoder steps", "candidates and bookkeeping", "reordering", "rest of the search",
         "outside the search")


def timed(seconds: dict, part: str, function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            seconds[part] += time.perf_counter() - start
    return wrapper


def instrument(seconds: dict, translators) -> None:
    """Time the parts around their calls (this process only; the plugin is not changed on disk)."""
    for translator in translators:
        encoder = translator.models[0].encoder
        encoder.forward = timed(seconds, "encoder", encoder.forward)
    DecoderSteps.log_probs = timed(seconds, "decoder steps", DecoderSteps.log_probs)
    DecoderSteps.reorder_within_sentences = staticmethod(
        timed(seconds, "reordering", DecoderSteps.reorder_within_sentences))
    compiled = beam_search.compiled_candidates
    if compiled is None:
        raise SystemExit("beam_candidates.cpp is not built: reinstall the package (pip install -e .)")

    class TimedBookkeeping:
        def __init__(self, *args):
            book = compiled.Bookkeeping(*args)
            self.advance_with_best_candidates = timed(seconds, "candidates and bookkeeping",
                                                      book.advance_with_best_candidates)
            self.advance = timed(seconds, "candidates and bookkeeping", book.advance)  # the last step's
            self.tokens, self.scores, self.finished = book.tokens, book.scores, book.finished
            self._book = book

        def run_steps(self, decoding, *args):
            inner = seconds["decoder steps"] + seconds["reordering"]
            start = time.perf_counter()
            result = self._book.run_steps(TimedDecoding(decoding), *args)
            inner = seconds["decoder steps"] + seconds["reordering"] - inner
            seconds["candidates and bookkeeping"] += time.perf_counter() - start - inner
            return result

    class TimedDecoding:
        def __init__(self, decoding):
            self.reorder = timed(seconds, "reordering", decoding.reorder)
            self.log_probs = timed(seconds, "decoder steps", decoding.log_probs)

    beam_search.compiled_candidates = type("Timed", (), {
        "best_candidates": staticmethod(compiled.best_candidates),
        "split_candidates": staticmethod(compiled.split_candidates),
        "Bookkeeping": TimedBookkeeping,
    })
    beam_search.BeamSearch.generate = timed(seconds, "search", beam_search.BeamSearch.generate)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a quickstart run directory (examples/bible_es_en/runs/latest)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: one decoding worker's view)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--verses", type=int, default=500)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    run = args.run
    encode, _ = text_tools(run)
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()[: args.verses]
    sources = [encode(line) for line in lines]
    engines = {}
    for name, checkpoint in (("float32", run / "checkpoints" / "checkpoint_best.pt"), ("int8", int8_copy(run))):
        engines[name] = Translator.from_pretrained(checkpoint, run / "data-bin", source_lang="es", target_lang="en",
                                                   tokenizer="moses", bpe="subword_nmt", bpe_codes=str(run / "codes"))
    seconds = defaultdict(float)
    instrument(seconds, engines.values())
    for translator in engines.values():  # warm-up
        translator.translate(lines[:CALL], encoded=sources[:CALL], beam=BEAM, max_sentences=CALL)
    results = {name: defaultdict(list) for name in engines}
    for _ in range(args.repeats):
        for name, translator in engines.items():
            seconds.clear()
            start = time.perf_counter()
            translator.translate(lines, encoded=sources, beam=BEAM, max_sentences=CALL)
            total = time.perf_counter() - start
            measured = dict(seconds)
            inside = sum(measured.get(p, 0.0) for p in PARTS[:4])
            measured["rest of the search"] = measured.pop("search") - inside
            measured["outside the search"] = total - inside - measured["rest of the search"]
            measured["total"] = total
            for part, value in measured.items():
                results[name][part].append(value)
    print(f"{len(lines)} verses, beam {BEAM} in calls of {CALL}, {args.threads} torch thread(s), "
          f"median of {args.repeats} (torch {torch.__version__}):")
    print(f"  {'part':28s}" + "".join(f"{name:>22s}" for name in engines))
    for part in PARTS + ("total",):
        cells = []
        for name in engines:
            value = statistics.median(results[name][part])
            share = value / statistics.median(results[name]["total"])
            cells.append(f"{value:8.3f} s {100 * share:5.1f}%" if part != "total" else f"{value:8.3f} s {'':6s}")
        print(f"  {part:28s}" + "".join(f"{c:>22s}" for c in cells))
    rates = "  ".join(f"{name} {len(lines) / statistics.median(results[name]['total']):.1f}" for name in engines)
    print(f"  sentences/s: {rates}")


if __name__ == "__main__":
    main()
