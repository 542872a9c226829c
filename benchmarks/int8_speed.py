"""int8 against float32 through the inference core, and what batch invariance costs.

Three forms of a trained run's model translate the same test verses in the same calls
(beam 5, --call sentences a call, as the server and issue 33 batch them), taking turns
in every repetition in an order that alternates, in one process:

- float32: checkpoint_best.pt;
- int8: its fconv-quantize copy (what users serve), attention sums batch-invariant;
- int8, float32 sums: the same int8 layers with the attention's sums left in float32
  (``swap_in_int8_modules_(keep=...)``): faster, but a sentence's answer may then
  depend on the batch it is in. Shown to price the batch invariance, never served.

    python benchmarks/int8_speed.py examples/bible_es_en/runs/latest [--sentences 256] [--call 16] [--repeats 3]

Reported: median sentences/s over the repetitions, the spread (max - min) / median, and
each form's ratio to float32; with --threads, torch's thread count (default: torch's).
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
from fconv_plugin.modules.attention import AttentionSums  # noqa: E402
from fconv_plugin.deployment.int8 import swap_in_int8_modules_  # noqa: E402


def translator(run: Path, checkpoint: Path) -> Translator:
    return Translator.from_pretrained(checkpoint, run / "data-bin", source_lang="es", target_lang="en",
                                      tokenizer="moses", bpe="subword_nmt", bpe_codes=str(run / "codes"), beam=5)


def forms(run: Path) -> dict:
    float_sums = translator(run, run / "checkpoints" / "checkpoint_best.pt")
    for model in float_sums.models:
        swap_in_int8_modules_(model, keep=[m for m in model.modules() if type(m) is AttentionSums])
    return {
        "float32": translator(run, run / "checkpoints" / "checkpoint_best.pt"),
        "int8": translator(run, int8_copy(run)),
        "int8, float32 sums": float_sums,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--call", type=int, default=16, help="sentences a generation call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    run = Path(args.run).resolve()
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()[:args.sentences]
    translators = forms(run)
    encoded = {name: [t.encode(line) for line in lines] for name, t in translators.items()}
    for t in translators.values():
        t.translate(lines[:args.call])  # warm-up
    rates = {name: [] for name in translators}
    names = list(translators)
    for repeat in range(args.repeats):
        for name in names if repeat % 2 == 0 else reversed(names):
            start = time.perf_counter()
            for i in range(0, len(lines), args.call):
                translators[name].translate(lines[i:i + args.call], encoded=encoded[name][i:i + args.call])
            rates[name].append(len(lines) / (time.perf_counter() - start))
    print(f"{len(lines)} test verses of {run.name}, beam 5, calls of {args.call}, {torch.get_num_threads()} threads, "
          f"{args.repeats} repetitions (torch {torch.__version__})")
    base = statistics.median(rates["float32"])
    for name, values in rates.items():
        median = statistics.median(values)
        spread = (max(values) - min(values)) / median
        print(f"{name:20s} {median:7.1f} sentences/s  spread {spread:5.1%}  x{median / base:.2f} of float32")


if __name__ == "__main__":
    main()
