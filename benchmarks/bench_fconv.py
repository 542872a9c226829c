"""fconv_plugin vs fairseq's built-in fconv, side by side, identical weights.

For each architecture both models get the same random weights (fairseq's, loaded
into the plugin) and a ~8k vocabulary. Generation goes through fairseq's
SequenceGenerator after make_generation_fast_, as fairseq-generate does; the two
models alternate within every repetition so drift hits both alike, and the report
shows medians, the ratio plugin/fairseq, and whether the hypotheses are identical.
Peak resident memory is measured in a separate process per model.

    .venv/bin/python benchmarks/bench_fconv.py            # full run
    .venv/bin/python benchmarks/bench_fconv.py --quick    # fewer repetitions
"""

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import fconv as reference_fconv  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

from fconv_plugin.models import ARCHITECTURES, FConvModel  # noqa: E402

VOCAB = 8000
SRC_LEN = 24
GEN_SETTINGS = {"beam5_batch16": (5, 16), "beam1_batch1": (1, 1)}
TRAIN_BATCH = (32, 24)  # sentences x tokens


class _Task:
    def __init__(self, dictionary):
        self.source_dictionary = self.target_dictionary = dictionary


def make_task():
    dictionary = Dictionary()
    for i in range(VOCAB - dictionary.nspecial):
        dictionary.add_symbol(f"w{i}")
    return _Task(dictionary)


def _args(arch):
    args = argparse.Namespace(arch=arch, max_source_positions=1024, max_target_positions=1024, dropout=0.1)
    ARCHITECTURES[arch](args)
    return args


def build_models(arch, task, seed=0):
    torch.manual_seed(seed)
    reference = reference_fconv.FConvModel.build_model(_args(arch), task)
    ours = FConvModel.build_model(_args(arch), task)
    ours.load_state_dict(reference.state_dict())
    return {"plugin": ours, "fairseq": reference}


def build_one(arch, task, which):
    """Only one of the two models, for measuring its memory on its own."""
    cls = FConvModel if which == "plugin" else reference_fconv.FConvModel
    return cls.build_model(_args(arch), task)


def source_batch(task, batch_size, seed):
    generator = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    src = torch.randint(d.nspecial, len(d), (batch_size, SRC_LEN), generator=generator)
    lengths = torch.randint(SRC_LEN // 2, SRC_LEN + 1, (batch_size,), generator=generator)
    for row, length in enumerate(lengths.tolist()):  # left padding, eos last
        src[row, : SRC_LEN - length] = d.pad()
    src[:, -1] = d.eos()
    return {"net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)}}


def prepared_for_generation(model, beam):
    model.eval()
    model.make_generation_fast_(beamable_mm_beam_size=beam, need_attn=False)
    return model


def time_call(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def bench_generation(arch, task, beam, batch_size, reps, max_len):
    """Fresh models (make_generation_fast_ is one-way), same seed, so the same weights."""
    prepared = {name: prepared_for_generation(m, beam) for name, m in build_models(arch, task).items()}
    sample = source_batch(task, batch_size, seed=1)
    generators = {
        name: SequenceGenerator([m], task.target_dictionary, beam_size=beam, max_len_a=0, max_len_b=max_len, min_len=max_len)
        for name, m in prepared.items()
    }
    times = {name: [] for name in prepared}
    outputs = {}
    with torch.inference_mode():
        for _ in range(reps):
            for name in prepared:  # alternate the two models
                seconds, outputs[name] = time_call(lambda: generators[name].generate([prepared[name]], sample))
                times[name].append(seconds)
    identical = all(
        torch.equal(a["tokens"], b["tokens"]) and abs(float(a["score"] - b["score"])) < 1e-4
        for sa, sb in zip(outputs["plugin"], outputs["fairseq"]) for a, b in zip(sa, sb)
    )
    tokens = sum(len(h[0]["tokens"]) for h in outputs["plugin"])
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {
        "sentences_per_s": {n: batch_size / s for n, s in medians.items()},
        "tokens_per_s": {n: tokens / s for n, s in medians.items()},
        "seconds_per_step": {n: s / max_len for n, s in medians.items()},
        "identical": identical,
    }


def bench_training(models, task, reps):
    sentences, length = TRAIN_BATCH
    sample = source_batch(task, sentences, seed=2)["net_input"]
    generator = torch.Generator().manual_seed(3)
    d = task.target_dictionary
    target = torch.randint(d.nspecial, len(d), (sentences, length), generator=generator)
    prev = torch.cat([torch.full((sentences, 1), d.eos()), target[:, :-1]], dim=1)
    times = {name: [] for name in models}
    for model in models.values():
        model.train()
    for _ in range(reps + 1):
        for name, model in models.items():
            def step():
                model.zero_grad(set_to_none=True)
                logits, _ = model(sample["src_tokens"], sample["src_lengths"], prev)
                loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1), reduction="sum")
                loss.backward()
            times[name].append(time_call(step)[0])
    words = sentences * length
    return {"target_words_per_s": {n: words / statistics.median(t[1:]) for n, t in times.items()}}


def copy_bandwidth():
    """Bytes per second of a large tensor copy (each byte read once and written once)."""
    source = torch.ones(64 * 1024 * 1024)  # 256 MB
    target = torch.empty_like(source)
    target.copy_(source)
    seconds = min(time_call(lambda: target.copy_(source))[0] for _ in range(5))
    return source.numel() * source.element_size() / seconds


def decoder_weight_bytes(model):
    """Bytes of decoder weights read once per decoding step (embedding tables: one row)."""
    total = 0
    for name, parameter in model.decoder.named_parameters():
        if name.startswith(("embed_tokens", "embed_positions")) or name.endswith("weight_g"):
            continue
        total += parameter.numel() * parameter.element_size()
    shared = getattr(model.decoder.fc3, "weight", None)
    if shared is model.decoder.embed_tokens.weight:
        total += shared.numel() * shared.element_size()
    return total


def peak_memory_child(arch, which, phase):
    """In a separate process: build one model, run one phase; peak RSS in bytes."""
    task = make_task()
    model = build_one(arch, task, which)
    if phase == "generate":
        prepared = prepared_for_generation(model, 5)
        generator = SequenceGenerator([prepared], task.target_dictionary, beam_size=5, max_len_a=0, max_len_b=30, min_len=30)
        with torch.inference_mode():
            generator.generate([prepared], source_batch(task, 16, seed=1))
    else:
        bench_training({which: model}, task, reps=1)
    return peak_resident_bytes()


def peak_resident_bytes():
    """This process's peak RSS (VmHWM). Not ru_maxrss: Linux carries that over from the
    parent across fork and exec, so a child would report the benchmark's own peak."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def peak_memory(arch, which, phase):
    code = (
        f"import sys; sys.argv = ['x']; sys.path.insert(0, {str(Path(__file__).parent)!r});"
        f"import bench_fconv as b; print(b.peak_memory_child({arch!r}, {which!r}, {phase!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--archs", nargs="+", default=["fconv_iwslt_de_en", "fconv_wmt_en_de"])
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    reps = 3 if args.quick else 7
    task = make_task()
    bandwidth = copy_bandwidth()
    results = {"threads": torch.get_num_threads(), "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
               "copy_bandwidth_GBps": bandwidth / 1e9, "archs": {}}
    for arch in args.archs:
        arch_results = {}
        for setting, (beam, batch) in GEN_SETTINGS.items():
            arch_results[setting] = bench_generation(arch, task, beam, batch, reps, max_len=30)
        models = build_models(arch, task)
        arch_results["train_step"] = bench_training(models, task, reps)
        weight_bytes = decoder_weight_bytes(models["plugin"])
        arch_results["beam1_floor_s_per_step"] = weight_bytes / bandwidth
        arch_results["peak_rss_MB"] = {
            phase: {which: peak_memory(arch, which, phase) / 2**20 for which in ("plugin", "fairseq")}
            for phase in ("generate", "train")
        }
        results["archs"][arch] = arch_results
        del models
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def print_table(results):
    print(f"torch {results['torch']}, {results['threads']} threads, copy bandwidth {results['copy_bandwidth_GBps']:.1f} GB/s")
    header = f"{'arch':<18} {'measure':<34} {'plugin':>12} {'fairseq':>12} {'plugin/fairseq':>15}"
    print(header)
    print("-" * len(header))
    for arch, r in results["archs"].items():
        rows = []
        for setting in GEN_SETTINGS:
            g = r[setting]
            same = "identical" if g["identical"] else "DIFFERENT"
            rows.append((f"{setting} sentences/s ({same})", g["sentences_per_s"]))
            rows.append((f"{setting} tokens/s", g["tokens_per_s"]))
        rows.append(("train step target words/s", r["train_step"]["target_words_per_s"]))
        for label, values in rows:
            print(f"{arch:<18} {label:<34} {values['plugin']:>12.1f} {values['fairseq']:>12.1f} {values['plugin'] / values['fairseq']:>14.2f}x")
        for phase, mem in r["peak_rss_MB"].items():
            label = f"peak RSS MB, {phase} (lower is better)"
            print(f"{arch:<18} {label:<34} {mem['plugin']:>12.0f} {mem['fairseq']:>12.0f} {mem['plugin'] / mem['fairseq']:>14.2f}x")
        step = r["beam1_batch1"]["seconds_per_step"]["plugin"]
        floor = r["beam1_floor_s_per_step"]
        print(f"{arch:<18} {'beam1 ms/step vs weight-stream floor':<34} {step * 1e3:>12.2f} {floor * 1e3:>12.2f} {step / floor:>14.2f}x floor")


if __name__ == "__main__":
    main()
