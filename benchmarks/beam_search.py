"""The inference core's beam search against fairseq's SequenceGenerator, on a trained run's model.

Both searches translate the run's test verses (tokenised and BPE-encoded once) in the
same calls (``--call`` sentences, sorted by length as fairseq batches them), taking
turns in every repetition, in one process, for float32 and the fconv-quantize int8 copy.
Reported:

- hypotheses: how many verses get the same finished hypotheses (tokens, in order) from
  both, and the largest score difference, for each option set below;
- speed: sentences/s of each search, and the ratio; the core's search also with its
  candidates chosen by torch operations (``one_pass=False``) instead of the compiled
  pass (``native/beam_candidates.cpp``), and with the decoder called through
  fairseq's incremental-state protocol (``explicit_state=False``) instead of
  ``models/decoder_steps.py``, to show what each gains;
- where the time goes in the core's search: the decoder's steps with their log-softmax,
  the rest (the encoder once per call, and the search: top-k, finishing, reordering), and
  text processing (Moses and BPE in, BPE and Moses out), in seconds for the test verses.

fairseq's generator runs with the plugin's host fixes installed, as in fairseq-interactive
with ``--user-dir fconv_plugin`` (its CPU n-gram blocker mended: ``compat/ngram_blocking.py``).

    python benchmarks/beam_search.py examples/bible_es_en/runs/latest [--call 16] [--repeats 3]
"""

import argparse
import logging
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from load_test import int8_copy  # noqa: E402  the load test's int8 copy of the run's model

from fconv_plugin import compat  # noqa: E402
from fconv_plugin.inference import Translator  # noqa: E402
from fconv_plugin.inference.beam_search import BeamSearch  # noqa: E402

OPTION_SETS = [
    dict(),
    dict(beam=4, lenpen=1.5, unkpen=0.5),
    dict(min_len=8, max_len_a=1.0, max_len_b=3),
    dict(nbest=5, lenpen=0.6),
    dict(no_repeat_ngram_size=2),
    dict(beam=1),
]


class TimedSearch(BeamSearch):
    """The core's search, with the seconds spent in the model's calls added up."""

    model_seconds = 0.0

    def _next_token_log_probs(self, tokens, decoding_state, attention):
        start = time.perf_counter()
        try:
            return super()._next_token_log_probs(tokens, decoding_state, attention)
        finally:
            TimedSearch.model_seconds += time.perf_counter() - start


def batches(translator: Translator, encoded, call: int):
    return list(translator._batches(encoded, None, call))


def both_searches(translator: Translator, options: dict):
    """(fairseq's generator and its models, the core's search) for ``options``."""
    generator, models, _ = translator._generator(replace(translator.defaults, **options), False)
    return generator, models, TimedSearch.like(generator, models[0])


def same_hypotheses(ours, theirs):
    """(sentences with the same finished hypotheses, the largest score or positional-score
    difference among them) of two searches' results for one batch."""
    same, largest = 0, 0.0
    for a, b in zip(ours, theirs):
        if len(a) == len(b) and all(torch.equal(x["tokens"], y["tokens"]) for x, y in zip(a, b)):
            same += 1
            for x, y in zip(a, b):
                largest = max(largest, abs(float(x["score"]) - float(y["score"])),
                              float((x["positional_scores"] - y["positional_scores"]).abs().max()))
    return same, largest


def agreement(translator: Translator, encoded, call: int, options: dict):
    generator, models, ours = both_searches(translator, options)
    same, largest = 0, 0.0
    for _, src, lengths in batches(translator, encoded, call):
        theirs = translator.task.inference_step(generator, models, {"net_input": {"src_tokens": src, "src_lengths": lengths}})
        batch_same, batch_largest = same_hypotheses(ours.generate(src, lengths), theirs)
        same, largest = same + batch_same, max(largest, batch_largest)
    return same, largest


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--call", type=int, default=16, help="sentences a generation call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=500)
    args = parser.parse_args()
    run = Path(args.run).resolve()
    compat.install()
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()[: args.sentences]
    print(f"{len(lines)} test verses of {run.name}, calls of {args.call}, {torch.get_num_threads()} threads "
          f"(torch {torch.__version__})")
    for form, checkpoint in (("float32", run / "checkpoints" / "checkpoint_best.pt"), ("int8", int8_copy(run))):
        translator = Translator.from_pretrained(checkpoint, run / "data-bin", source_lang="es", target_lang="en",
                                                tokenizer="moses", bpe="subword_nmt", bpe_codes=str(run / "codes"))
        start = time.perf_counter()
        encoded = [translator.encode(line) for line in lines]
        encode_seconds = time.perf_counter() - start
        for options in OPTION_SETS if form == "float32" else OPTION_SETS[:1]:
            same, largest = agreement(translator, encoded, args.call, options)
            print(f"{form} {options or 'beam 5 (the defaults)'}: identical hypotheses for {same} of {len(lines)} verses, "
                  f"largest score difference {largest:.3g}")

        generator, models, ours = both_searches(translator, {})
        calls = batches(translator, encoded, args.call)
        torch_operations = TimedSearch.like(generator, models[0], one_pass=False)
        fairseq_protocol = TimedSearch.like(generator, models[0], explicit_state=False)
        searches = {"fairseq's SequenceGenerator": None, "the core's BeamSearch": ours,
                    "the core's, torch top-k": torch_operations, "the core's, fairseq's state": fairseq_protocol}
        seconds = {name: [] for name in searches}
        model_seconds = []
        for repeat in range(args.repeats):
            names = list(seconds) if repeat % 2 == 0 else list(reversed(seconds))
            for name in names:
                TimedSearch.model_seconds = 0.0
                start = time.perf_counter()
                with torch.no_grad():
                    for _, src, lengths in calls:
                        if name.startswith("fairseq"):
                            translator.task.inference_step(generator, models,
                                                           {"net_input": {"src_tokens": src, "src_lengths": lengths}})
                        else:
                            searches[name].generate(src, lengths)
                seconds[name].append(time.perf_counter() - start)
                if searches[name] is ours:
                    model_seconds.append(TimedSearch.model_seconds)
        rates = {name: len(lines) / statistics.median(values) for name, values in seconds.items()}
        base = rates["fairseq's SequenceGenerator"]
        for name, rate in rates.items():
            print(f"  {form}, beam 5, {name:<28} {rate:6.1f} sentences/s  x{rate / base:.2f}")
        results = translator.translate(lines, encoded=encoded, max_sentences=args.call)
        start = time.perf_counter()
        for result in results:
            translator.decode(translator.task.target_dictionary.string(torch.tensor(result.best.tokens[:-1]), "@@ "))
        decode_seconds = time.perf_counter() - start
        total = statistics.median(seconds["the core's BeamSearch"])
        model = statistics.median(model_seconds)
        print(f"  {form}, where the core's time goes for {len(lines)} verses: decoder steps {model:.2f} s, "
              f"encoder and search {total - model:.2f} s, "
              f"text processing {encode_seconds + decode_seconds:.2f} s (in {encode_seconds:.2f}, out {decode_seconds:.2f})")


if __name__ == "__main__":
    main()
