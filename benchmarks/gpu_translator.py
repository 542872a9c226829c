"""The inference core's ``Translator`` on a GPU against the CPU, in float32, float16 and bfloat16.

What ``fconv-translate`` and ``fconv-serve`` run, on the first ``--verses`` test verses of a
quickstart run in calls of ``--call``:

1. The ``Translator`` on the GPU (the core's search, then fairseq's with ``search="fairseq"``)
   in each precision: how many verses get the CPU float32 Translator's text, verses/s, and
   whether alignments, ``--replace-unk`` and every layer's attention come back.
2. The core's search with the decoder's state in plain tensors (``models/decoder_steps.py``,
   what it runs) against the same search driving the decoder through fairseq's incremental
   protocol (``explicit_state=False``), on the same batches: verses with the same
   hypotheses and the largest score (or positional-score) difference, in each precision.

    python benchmarks/gpu_translator.py examples/bible_es_en/runs/latest [--verses 64] [--call 16]

(``--precisions float32 --cpu`` rehearses it on a CPU.)
"""

import argparse
import logging
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
from beam_search import same_hypotheses  # noqa: E402  beam_search.py's comparison of two searches' hypotheses

from fconv_plugin.inference import Translator  # noqa: E402
from fconv_plugin.inference.beam_search import BeamSearch  # noqa: E402

FLAGS = {"float32": {}, "float16": {"fp16": True}, "bfloat16": {"bf16": True}}


def synchronised_seconds(function) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    function()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def explicit_against_protocol(translator: Translator, lines, call: int):
    """(verses with the same hypotheses, the largest score or positional-score difference) of
    the core's search with ``DecoderSteps`` against it through fairseq's incremental protocol."""
    generator, models, _ = translator._generator(translator.defaults, False)
    explicit = BeamSearch.like(generator, models[0])
    protocol = BeamSearch.like(generator, models[0], explicit_state=False)
    encoded = [translator.encode(line) for line in lines]
    same, largest = 0, 0.0
    with torch.no_grad():
        for _, src, lengths in translator._batches(encoded, None, call):
            src, lengths = src.to(translator.device), lengths.to(translator.device)
            batch_same, batch_largest = same_hypotheses(explicit.generate(src, lengths), protocol.generate(src, lengths))
            same, largest = same + batch_same, max(largest, batch_largest)
    return same, largest


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a quickstart run directory (or one made by gpu.py pack)")
    parser.add_argument("--verses", type=int, default=64)
    parser.add_argument("--call", type=int, default=16, help="sentences a generation call")
    parser.add_argument("--precisions", nargs="+", default=list(FLAGS), choices=list(FLAGS))
    parser.add_argument("--cpu", action="store_true", help="run the 'GPU' rows on the CPU (a rehearsal)")
    args = parser.parse_args()
    run = args.run
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()[: args.verses]
    common = dict(source_lang="es", target_lang="en", tokenizer="moses", bpe="subword_nmt", bpe_codes=str(run / "codes"))
    checkpoint, data = run / "checkpoints" / "checkpoint_best.pt", run / "data-bin"
    reference = Translator.from_pretrained(checkpoint, data, cpu=True, **common).translate(lines, max_sentences=args.call)
    device = "cpu" if args.cpu else torch.cuda.get_device_name(0)
    print(f"{len(lines)} test verses of {run.name}, calls of {args.call}; {device}, torch {torch.__version__}")
    for precision in args.precisions:
        for search in ("vectorised", "fairseq"):
            translator = Translator.from_pretrained(checkpoint, data, search=search, cpu=args.cpu,
                                                    **FLAGS[precision], **common)
            translator.translate(lines[: args.call], max_sentences=args.call)  # warm-up
            results = []
            seconds = synchronised_seconds(lambda: results.extend(translator.translate(lines, max_sentences=args.call)))
            same = sum(a.best.text == b.best.text for a, b in zip(results, reference))
            rich = translator.translate(lines[:3], alignment=True, replace_unk=True, attention=True)[0].best
            print(f"{'the core' if search == 'vectorised' else 'fairseq':8s} {precision:8s}: same text as the CPU's "
                  f"float32 for {same}/{len(lines)}; {len(lines) / seconds:.0f} verses/s; alignment "
                  f"{rich.alignment[:3]}..., {len(rich.attention.layers)} attention layers")
            if search == "vectorised":
                same, largest = explicit_against_protocol(translator, lines, args.call)
                print(f"  the core's decoder steps against fairseq's protocol, {precision}: the same hypotheses for "
                      f"{same}/{len(lines)}, largest score or positional-score difference {largest:.3g}")


if __name__ == "__main__":
    main()
