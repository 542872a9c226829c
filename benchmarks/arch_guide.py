"""The numbers behind docs/your-data.md's "Choosing an architecture" table, on this machine.

For every named architecture: parameters, training speed (target words per second of
one forward and backward pass over 32 sentences of 24 tokens, the median of a few
steps after a warm-up) and generation speed (sentences per second, fairseq's
SequenceGenerator with beam 5 over 16 sentences, 30 output tokens each, after
make_generation_fast_ as fairseq-generate does). One vocabulary for all (8,000, as in
the quickstart) so the rows compare; a larger vocabulary costs the output layer more.
These time the plugin's model only: fairseq-train's and fairseq-generate's own
overheads (data loading, the optimizer step, logging) come on top.

    .venv/bin/python benchmarks/arch_guide.py [--archs fconv_iwslt_de_en ...]
    .venv/bin/python benchmarks/arch_guide.py --quick      # one architecture, one step: checks that it runs
"""

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_fconv as bench  # noqa: E402  (shares its model building and batches; imports the plugin before fairseq)
import harness  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

from fconv_plugin.models import ARCHITECTURES  # noqa: E402

VOCAB = 8000


def measure(arch: str, train_steps: int, generate_runs: int) -> dict:
    task = bench.make_task(arch, VOCAB)
    torch.manual_seed(0)
    model = bench.build_one(arch, task, "plugin")
    parameters = sum(p.numel() for p in model.parameters())
    train = bench.bench_training({"plugin": model}, task, reps=train_steps)["target_words_per_s"]["plugin"]
    model = bench.prepared_for_generation(model, 5)
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=5, max_len_a=0, max_len_b=30, min_len=30)
    sample = bench.source_batch(task, 16, seed=1)
    seconds = []
    with torch.inference_mode():
        generator.generate([model], sample)  # warm-up
        for _ in range(generate_runs):
            start = time.perf_counter()
            generator.generate([model], sample)
            seconds.append(time.perf_counter() - start)
    return {"parameters": parameters, "train_words_per_s": train, "sentences_per_s": 16 / statistics.median(seconds)}


def main(argv=None):
    parser = harness.arguments(__doc__, run=False)
    parser.add_argument("--archs", nargs="+", default=sorted(ARCHITECTURES, key=lambda a: a != "fconv_iwslt_de_en"))
    parser.add_argument("--train-steps", type=int, default=3)
    args = harness.parse(parser, argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.archs, args.train_steps = ["fconv_iwslt_de_en"], 1
    print(f"{harness.machine()}; vocabulary {VOCAB}")
    print(f"{'--arch':<20} {'parameters':>12} {'train target words/s':>22} {'generate sentences/s':>22}")
    for arch in args.archs:
        r = measure(arch, args.train_steps, args.repeats)
        print(f"{arch:<20} {r['parameters'] / 1e6:>11.1f}M {r['train_words_per_s']:>22.0f} {r['sentences_per_s']:>22.2f}",
              flush=True)


if __name__ == "__main__":
    main()
