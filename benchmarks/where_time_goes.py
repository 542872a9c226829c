"""Where beam search spends its time with a small model, plugin and built-in side by side.

A small model is what most CPU users run (issue: 128 wide, 4 + 3 layers, 8k BPE
vocabulary). Both models get the same random weights, are prepared as fairseq-generate
prepares them (make_generation_fast_), and translate the same batch with fairseq's
SequenceGenerator; cProfile splits each run into the encoder, the decoder's steps, the
log-softmax over the vocabulary, and the rest (fairseq's beam search bookkeeping: top-k,
finished hypotheses, reordering). The models alternate over the repetitions; the table
gives each part's median seconds and its share of the run.

    .venv/bin/python benchmarks/where_time_goes.py                       # 128 wide, 4 + 3 layers
    .venv/bin/python benchmarks/where_time_goes.py --width 256            # fconv_iwslt_de_en's width
"""

import argparse
import cProfile
import pstats
import statistics
import sys
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fconv import build_models, make_task, prepared_for_generation, source_batch, turns  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

# the functions whose cumulative time is reported: (file name ending, function name, a word in
# the name of the class that defines it, or None for any)
PARTS = {
    "encoder": ("fconv.py", "forward", "Encoder"),
    "decoder steps": ("fconv.py", "forward", "Decoder"),
    "log-softmax over the vocabulary": ("fairseq_model.py", "get_normalized_probs", None),
}


def profile_generation(model, task, sample, beam):
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=beam, max_len_a=1.2, max_len_b=10)
    profiler = cProfile.Profile()
    with torch.inference_mode():
        profiler.enable()
        generator.generate([model], sample)
        profiler.disable()
    stats = pstats.Stats(profiler).stats
    total = max(entry[3] for entry in stats.values())  # the outermost call's cumulative time
    parts = {}
    for label, (file_end, function, owner) in PARTS.items():
        seconds = 0.0
        for (filename, line, name), entry in stats.items():
            if filename.endswith(file_end) and name == function and _owned_by(filename, line, owner):
                seconds += entry[3]
        parts[label] = seconds
    parts["beam search and the rest"] = total - sum(parts.values())
    parts["total"] = total
    return parts


def _owned_by(filename, line, owner):
    """Whether the function at ``filename:line`` is a method of a class named like ``owner``."""
    if owner is None:
        return True
    with open(filename) as source:
        lines = source.readlines()[: line - 1]
    for text in reversed(lines):
        if text.startswith("class "):
            return owner in text
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--vocabulary", type=int, default=8000)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    w = args.width
    arch = "fconv_iwslt_de_en"
    task = make_task(arch, args.vocabulary)
    overrides = dict(encoder_embed_dim=w, decoder_embed_dim=w, decoder_out_embed_dim=w,
                     encoder_layers=f"[({w}, 3)] * 4", decoder_layers=f"[({w}, 3)] * 3")
    models = {name: prepared_for_generation(m, args.beam) for name, m in build_models(arch, task, overrides=overrides).items()}
    sample = source_batch(task, args.batch, seed=1)
    for model in models.values():  # warm-up
        profile_generation(model, task, sample, args.beam)
    runs = {name: [] for name in models}
    for repetition in range(args.reps):
        for name in turns(models, repetition):
            runs[name].append(profile_generation(models[name], task, sample, args.beam))
    print(f"{w} wide, 4 + 3 layers, {args.vocabulary} words, beam {args.beam}, batch {args.batch}, "
          f"{torch.get_num_threads()} threads, cProfile (which adds its own overhead to both), median of {args.reps}")
    print(f"{'part':<34} {'fairseq s':>10} {'share':>6} {'plugin s':>10} {'share':>6} {'plugin/fairseq':>15}")
    for part in list(PARTS) + ["beam search and the rest", "total"]:
        medians = {name: statistics.median(run[part] for run in runs[name]) for name in models}
        totals = {name: statistics.median(run["total"] for run in runs[name]) for name in models}
        print(f"{part:<34} {medians['fairseq']:>10.3f} {medians['fairseq'] / totals['fairseq']:>6.0%} "
              f"{medians['plugin']:>10.3f} {medians['plugin'] / totals['plugin']:>6.0%} "
              f"{medians['plugin'] / max(medians['fairseq'], 1e-9):>14.2f}x")


if __name__ == "__main__":
    main()
