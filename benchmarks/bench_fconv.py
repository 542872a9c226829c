"""fconv_plugin vs fairseq's built-in fconv, side by side, identical weights.

For each architecture both models get the same random weights (fairseq's, loaded
into the plugin) and the vocabulary such a model is trained with (8k joint BPE for
the small IWSLT model, as in the quickstart; 40k for WMT'14 En-De, as in the paper).
Generation goes through fairseq's SequenceGenerator after make_generation_fast_, as
fairseq-generate does, after one untimed warm-up run each; a third model, the plugin's
with int8 weights (what fconv-quantize writes), runs beside them. The models take turns
within every repetition, in an order that alternates from one repetition to the next,
so drift and cache effects hit both alike; the report shows medians with their spread
(interquartile range / median), the ratio plugin/fairseq, and whether the hypotheses
were identical in every repetition (same number, same tokens, same scores). Peak
memory is measured in a separate process per model, above that process's footprint
after the imports (torch and fairseq alone take ~400 MB). The same run measures the
machine's peak GEMM rate (float32, bfloat16 and int8), how close beam-5 decoding comes to
it, and the training step's rate: its floating-point operations (forward and backward,
counted by torch.utils.flop_counter) per second against that peak. On a CPU with bfloat16
units (``fconv_plugin.precision``) the training step also runs in mixed precision, as
``fairseq-train --cpu --bf16`` trains (``FConvModel.compute_in_``); elsewhere that column
says why it is left out, and the bfloat16 peak shows why.

    .venv/bin/python benchmarks/bench_fconv.py            # full run
    .venv/bin/python benchmarks/bench_fconv.py --quick    # one architecture, one repetition, a 256^3 peak: checks that it runs
    .venv/bin/python benchmarks/bench_fconv.py --train-only --archs fconv_iwslt_de_en fconv_gigaword
"""

import argparse
import copy
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

# the plugin first: it imports fairseq without fairseq's DEBUG logging of every library
from fconv_plugin import backend, host_memory, precision  # noqa: E402
from fconv_plugin.models import ARCHITECTURES, FConvModel  # noqa: E402

from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import fconv as reference_fconv  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

VOCAB = {"fconv_iwslt_de_en": 8000, "fconv_wmt_en_de": 40000}  # see the docstring
DEFAULT_VOCAB = 8000
TORCH_DRAWS_BF16 = "plugin bf16, torch's dropout draws"  # with_bf16: the side-by-side reference
SRC_LEN = 24
GEN_SETTINGS = {"beam5_batch16": (5, 16), "beam1_batch1": (1, 1)}
TRAIN_BATCH = (32, 24)  # sentences x tokens (--train-batch; fairseq-train's --max-tokens 3000 is about 100 x 30)


class _Task:
    def __init__(self, dictionary):
        self.source_dictionary = self.target_dictionary = dictionary


def make_task(arch, vocabulary=None):
    """A dictionary of ``vocabulary`` symbols (default: the one ``arch`` is trained with)."""
    dictionary = Dictionary()
    for i in range((vocabulary or VOCAB.get(arch, DEFAULT_VOCAB)) - dictionary.nspecial):
        dictionary.add_symbol(f"w{i}")
    return _Task(dictionary)


def _args(arch, **overrides):
    args = argparse.Namespace(arch=arch, max_source_positions=1024, max_target_positions=1024, dropout=0.1, **overrides)
    ARCHITECTURES[arch](args)
    return args


def build_models(arch, task, seed=0, overrides=None):
    """Both models with the same (fairseq's) random weights; ``overrides``: model options."""
    torch.manual_seed(seed)
    reference = reference_fconv.FConvModel.build_model(_args(arch, **(overrides or {})), task)
    ours = FConvModel.build_model(_args(arch, **(overrides or {})), task)
    ours.load_state_dict(reference.state_dict())
    return {"plugin": ours, "fairseq": reference}


def with_bf16(models, side_by_side=True):
    """The plugin's model in mixed precision too (``--bf16`` on a CPU), where the CPU has the units; where
    its dropout draws are not torch's here (backend.training_dropout), also with torch's, side by side
    (``side_by_side``)."""
    if precision.bf16_units() is None:
        return models
    mixed = {"plugin bf16": copy.deepcopy(models["plugin"]).compute_in_(torch.bfloat16)}
    if side_by_side and backend.training_dropout(torch.bfloat16) != backend.TORCH_DRAWS:
        mixed[TORCH_DRAWS_BF16] = copy.deepcopy(models["plugin"]).compute_in_(torch.bfloat16, backend.TORCH_DRAWS)
    return {**models, **mixed}


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


def same_hypotheses(ours, reference) -> bool:
    """Same number of sentences and hypotheses, same tokens, scores within 1e-4."""
    if len(ours) != len(reference):
        return False
    for our_sentence, reference_sentence in zip(ours, reference):
        if len(our_sentence) != len(reference_sentence):
            return False
        for a, b in zip(our_sentence, reference_sentence):
            if not torch.equal(a["tokens"], b["tokens"]) or abs(float(a["score"] - b["score"])) >= 1e-4:
                return False
    return True


def summary(seconds):
    """Median and spread (interquartile range / median) of repeated timings."""
    median = statistics.median(seconds)
    if len(seconds) >= 4:
        q1, _, q3 = statistics.quantiles(seconds, n=4)
    else:
        q1, q3 = min(seconds), max(seconds)
    return median, (q3 - q1) / median


def with_int8(models):
    """The plugin's model once more, with int8 weights (fconv-quantize's conversion)."""
    int8 = copy.deepcopy(models["plugin"])
    int8.quantize_int8_()
    return {**models, "int8": int8}


def bench_generation(arch, task, beam, batch_size, reps, max_len):
    """Fresh models (make_generation_fast_ is one-way), same seed, so the same weights."""
    prepared = {name: prepared_for_generation(m, beam) for name, m in with_int8(build_models(arch, task)).items()}
    sample = source_batch(task, batch_size, seed=1)
    generators = {
        name: SequenceGenerator([m], task.target_dictionary, beam_size=beam, max_len_a=0, max_len_b=max_len, min_len=max_len)
        for name, m in prepared.items()
    }
    times = {name: [] for name in prepared}
    identical = True
    with torch.inference_mode():
        for name in prepared:  # warm-up: first-call allocations and kernel selection, untimed
            generators[name].generate([prepared[name]], sample)
        for repetition in range(reps):
            outputs = {}
            for name in harness.turns(prepared, repetition):
                seconds, outputs[name] = time_call(lambda: generators[name].generate([prepared[name]], sample))
                times[name].append(seconds)
            identical = identical and same_hypotheses(outputs["plugin"], outputs["fairseq"])
    tokens = sum(len(h[0]["tokens"]) for h in outputs["plugin"])
    int8_agrees = sum(torch.equal(a[0]["tokens"], b[0]["tokens"]) for a, b in zip(outputs["int8"], outputs["plugin"]))
    medians, spreads = {}, {}
    for name, seconds in times.items():
        medians[name], spreads[name] = summary(seconds)
    return {
        "sentences_per_s": {n: batch_size / s for n, s in medians.items()},
        "tokens_per_s": {n: tokens / s for n, s in medians.items()},
        "seconds_per_step": {n: s / max_len for n, s in medians.items()},
        "spread": spreads,
        "identical": identical,
        "int8_same_best": f"{int8_agrees}/{batch_size}",
    }


def training_batch(task, shape=None):
    """Source, previous and target tokens of one training batch, ``shape`` (sentences, tokens) or TRAIN_BATCH."""
    sentences, length = shape or TRAIN_BATCH
    sample = source_batch(task, sentences, seed=2)["net_input"]
    generator = torch.Generator().manual_seed(3)
    d = task.target_dictionary
    target = torch.randint(d.nspecial, len(d), (sentences, length), generator=generator)
    prev = torch.cat([torch.full((sentences, 1), d.eos()), target[:, :-1]], dim=1)
    return sample, prev, target


def training_step(model, sample, prev, target):
    """One forward and backward pass: what fairseq-train does per batch, without the optimizer."""
    model.zero_grad(set_to_none=True)
    logits, _ = model(sample["src_tokens"], sample["src_lengths"], prev)
    logits = logits.float()  # the loss in float32, as fairseq's criteria take it (a bfloat16 model's logits)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1), reduction="sum")
    loss.backward()


def _conv_tbc_flops(input_shape, weight_shape, *args, out_shape=None, **kwargs):
    """2 · out_time · batch · k · in · out (torch's counter has no formula for conv_tbc)."""
    kernel, in_channels, out_channels = weight_shape
    return 2 * out_shape[0] * out_shape[1] * kernel * in_channels * out_channels


def _addmm_flops(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs):
    """2 · m · k · n for self += a @ b."""
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


def training_flops(model, task, shape=None) -> int:
    """Floating-point operations of one training step (forward and backward), as counted
    by torch.utils.flop_counter (matrix products and convolutions)."""
    from torch.utils.flop_counter import FlopCounterMode

    aten = torch.ops.aten
    # conv_tbc's backward runs as in-place addmm_ calls, one per kernel tap, which the counter has no formula for
    counter = FlopCounterMode(display=False, custom_mapping={aten.conv_tbc: _conv_tbc_flops, aten.addmm_: _addmm_flops})
    model.train()
    with counter:
        training_step(model, *training_batch(task, shape))
    return counter.get_total_flops()


def bench_training(models, task, reps, shape=None):
    sentences, length = shape or TRAIN_BATCH
    sample, prev, target = training_batch(task, (sentences, length))
    times = {name: [] for name in models}
    for model in models.values():
        model.train()
    for repetition in range(reps + 1):  # the first, untimed in the summary, is the warm-up
        for name in harness.turns(models, repetition):
            model = models[name]
            times[name].append(time_call(lambda: training_step(model, sample, prev, target))[0])
    words = sentences * length
    summaries = {name: summary(seconds[1:]) for name, seconds in times.items()}
    flops = {name: training_flops(model, task, (sentences, length)) for name, model in models.items()}
    return {"target_words_per_s": {n: words / median for n, (median, _) in summaries.items()},
            "spread": {n: spread for n, (_, spread) in summaries.items()},
            "flops_per_step": flops,
            "GFLOPs": {n: flops[n] / median / 1e9 for n, (median, _) in summaries.items()}}


def copy_bandwidth():
    """Bytes per second of a large tensor copy (each byte read once and written once)."""
    source = torch.ones(64 * 1024 * 1024)  # 256 MB
    target = torch.empty_like(source)
    target.copy_(source)
    seconds = min(time_call(lambda: target.copy_(source))[0] for _ in range(5))
    return source.numel() * source.element_size() / seconds


PEAK_GEMM_SIZE = 1536  # --quick: harness.QUICK_PEAK_SIZE


def peak_gemm_rates(size=PEAK_GEMM_SIZE):
    """GFLOP/s of one large float32 matrix product, of the bfloat16 one and of the int8 (dynamic) one."""
    from fconv_plugin.deployment.int8 import Int8Weight

    a, b = torch.randn(size, size), torch.randn(size, size)
    # without bfloat16 units torch emulates it at about 1 GFLOP/s: half the size (an eighth of the work)
    half = size if precision.bf16_units() else size // 2
    a16, b16 = a[:half, :half].bfloat16(), b[:half, :half].bfloat16()
    int8 = Int8Weight.from_float(b)
    rates = {}
    for name, product, n in (("float32", lambda: a @ b.t(), size), ("bfloat16", lambda: a16 @ b16.t(), half),
                             ("int8", lambda: int8.linear(a, None), size)):
        product()
        seconds = min(time_call(product)[0] for _ in range(5))
        rates[name] = 2 * n**3 / seconds / 1e9
    return rates


def decoder_gemm_flops_per_step(model, rows):
    """Multiply-adds x 2 of the decoder's matrix products for one step of ``rows`` hypotheses."""
    weights = sum(p.numel() for name, p in model.decoder.named_parameters()
                  if not name.startswith(("embed_tokens", "embed_positions")) and not name.endswith(("weight_g", "bias")))
    return 2 * weights * rows


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
    """In a separate process: build one model, run one phase; bytes of peak RSS above
    the process's footprint after the imports (the same for both models)."""
    task = make_task(arch)
    footprint = resident_bytes("VmRSS")
    model = build_one(arch, task, which)
    if phase == "generate":
        prepared = prepared_for_generation(model, 5)
        generator = SequenceGenerator([prepared], task.target_dictionary, beam_size=5, max_len_a=0, max_len_b=30, min_len=30)
        with torch.inference_mode():
            generator.generate([prepared], source_batch(task, 16, seed=1))
    else:
        bench_training({which: model}, task, reps=1)
    return resident_bytes("VmHWM") - footprint


def resident_bytes(field):
    """This process's resident memory now (VmRSS) or at its peak (VmHWM). Not ru_maxrss:
    Linux carries that over from the parent across fork and exec."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_memory(arch, which, phase):
    """``peak_memory_child`` in a new process: this script again, with ``--peak-memory``."""
    out = subprocess.run([sys.executable, __file__, "--peak-memory", arch, which, phase], capture_output=True, text=True,
                         check=True, timeout=1800).stdout
    return int(out.strip().splitlines()[-1])


def main(argv=None):
    parser = harness.arguments(__doc__, run=False)
    parser.set_defaults(repeats=7)
    parser.add_argument("--archs", nargs="+", default=["fconv_iwslt_de_en", "fconv_wmt_en_de"])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--train-only", action="store_true", help="only the training step (speed, FLOP/s, utilisation)")
    parser.add_argument("--train-batch", nargs=2, type=int, metavar=("SENTENCES", "TOKENS"), default=list(TRAIN_BATCH),
                        help=f"the training step's batch (default {TRAIN_BATCH[0]} {TRAIN_BATCH[1]}; 100 30 is about "
                             "fairseq-train's --max-tokens 3000, the quickstart's)")
    parser.add_argument("--peak-memory", nargs=3, metavar=("ARCH", "WHICH", "PHASE"), help=argparse.SUPPRESS)
    args = harness.parse(parser, argv)
    if args.peak_memory:  # one model's peak, in a process of its own (peak_memory)
        print(peak_memory_child(*args.peak_memory))
        return
    torch.set_num_threads(args.threads)
    # the training step as fairseq-train runs it on the CPU; decoding keeps malloc as fairseq-generate and fconv-serve have it
    memory = host_memory.keep_freed_memory() if args.train_only else "malloc as it is (decoding's)"
    if args.quick:
        args.archs = ["fconv_iwslt_de_en"]
    reps = args.repeats
    bandwidth = copy_bandwidth()
    gemm_size = harness.QUICK_PEAK_SIZE if args.quick else PEAK_GEMM_SIZE
    results = {"threads": torch.get_num_threads(), "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
               "bf16_units": precision.bf16_units(),
               "copy_bandwidth_GBps": bandwidth / 1e9, "peak_gemm_size": gemm_size, "peak_gemm_GFLOPs": peak_gemm_rates(gemm_size),
               "train_batch": list(args.train_batch), "training_memory": memory, "archs": {}}
    for arch in args.archs:
        task = make_task(arch)
        arch_results = {"vocabulary": len(task.target_dictionary)}
        models = build_models(arch, task)
        arch_results["train_step"] = bench_training(with_bf16(models), task, reps, tuple(args.train_batch))
        if args.train_only:
            results["archs"][arch] = arch_results
            continue
        for setting, (beam, batch) in GEN_SETTINGS.items():
            arch_results[setting] = bench_generation(arch, task, beam, batch, reps, max_len=30)
        weight_bytes = decoder_weight_bytes(models["plugin"])
        beam, batch = GEN_SETTINGS["beam5_batch16"]
        arch_results["beam5_gemm_flops_per_step"] = decoder_gemm_flops_per_step(models["plugin"], beam * batch)
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
    peak, size = results["peak_gemm_GFLOPs"], results["peak_gemm_size"]
    print(harness.machine())
    print(f"torch {results['torch']}, {results['threads']} threads, copy bandwidth {results['copy_bandwidth_GBps']:.1f} GB/s, "
          f"peak GEMM {peak['float32']:.0f} GFLOP/s float32, {peak['bfloat16']:.1f} GFLOP/s bfloat16"
          f"{'' if results['bf16_units'] else f' ({size // 2}^3)'}, {peak['int8']:.0f} GFLOP/s int8 ({size}^3)")
    units = results["bf16_units"]
    print(f"bfloat16 units: {units} (the training step also runs as fairseq-train --cpu --bf16 trains)" if units else
          "bfloat16 units: none (AMX-BF16 or AVX-512 BF16): --bf16 --cpu is refused here, so no bfloat16 training step")
    sentences, tokens = results["train_batch"]
    print(f"speeds: median of the repetitions (± interquartile range / median); memory: peak above the imports; "
          f"training batch {sentences} x {tokens} tokens; training memory: {results['training_memory']}")
    header = (f"{'arch (vocabulary)':<24} {'measure':<34} {'fairseq':>15} {'plugin':>15} {'plugin int8':>15}"
              f" {'plugin/fairseq':>15} {'int8/fairseq':>13}")
    print(header)
    print("-" * len(header))
    for arch, r in results["archs"].items():
        name = f"{arch} ({r['vocabulary'] // 1000}k)"
        train = r["train_step"]
        cells = [f"{train['target_words_per_s'][n]:.1f} ±{train['spread'][n]:.0%}" for n in ("fairseq", "plugin")]
        ratio = train["target_words_per_s"]["plugin"] / train["target_words_per_s"]["fairseq"]
        print(f"{name:<24} {'train step target words/s':<34} {cells[0]:>15} {cells[1]:>15} {'-':>15} {ratio:>14.2f}x {'-':>13}")
        rates = train["GFLOPs"]
        print(f"{name:<24}   train step (forward + backward, {train['flops_per_step']['plugin'] / 1e9:.1f} GFLOP): "
              f"fairseq {rates['fairseq']:.0f} GFLOP/s ({rates['fairseq'] / peak['float32']:.0%} of the float32 peak), "
              f"plugin {rates['plugin']:.0f} GFLOP/s ({rates['plugin'] / peak['float32']:.0%})")
        if "plugin bf16" in rates:
            words = train["target_words_per_s"]
            print(f"{name:<24}   train step in bfloat16 (--bf16): {words['plugin bf16']:.1f} target words/s "
                  f"±{train['spread']['plugin bf16']:.0%}, {words['plugin bf16'] / words['plugin']:.2f}x float32's, "
                  f"{words['plugin bf16'] / words['fairseq']:.2f}x fairseq's; {rates['plugin bf16']:.0f} GFLOP/s "
                  f"({rates['plugin bf16'] / peak['bfloat16']:.0%} of the bfloat16 peak)")
        if TORCH_DRAWS_BF16 in rates:
            words = train["target_words_per_s"]
            print(f"{name:<24}   bfloat16's dropout, {backend.training_dropout(torch.bfloat16)} against "
                  f"{backend.TORCH_DRAWS}: {words['plugin bf16']:.1f} against {words[TORCH_DRAWS_BF16]:.1f} target "
                  f"words/s ±{train['spread'][TORCH_DRAWS_BF16]:.0%}, {words['plugin bf16'] / words[TORCH_DRAWS_BF16]:.2f}x")
        if "peak_rss_MB" not in r:
            continue
        for setting in GEN_SETTINGS:
            g = r[setting]
            same = "identical" if g["identical"] else "DIFFERENT"
            for label, values in ((f"{setting} sentences/s", g["sentences_per_s"]), (f"{setting} tokens/s", g["tokens_per_s"])):
                cells = [f"{values[n]:.1f} ±{g['spread'][n]:.0%}" for n in ("fairseq", "plugin", "int8")]
                print(f"{name:<24} {label:<34} {cells[0]:>15} {cells[1]:>15} {cells[2]:>15}"
                      f" {values['plugin'] / values['fairseq']:>14.2f}x {values['int8'] / values['fairseq']:>12.2f}x")
            print(f"{name:<24}   hypotheses: plugin vs fairseq {same} in every repetition; "
                  f"int8's best = float32's for {g['int8_same_best']} sentences (random weights)")
        for phase, mem in r["peak_rss_MB"].items():
            label = f"peak MB, {phase} (lower is better)"
            print(f"{name:<24} {label:<34} {mem['fairseq']:>15.0f} {mem['plugin']:>15.0f} {'-':>15}"
                  f" {mem['plugin'] / mem['fairseq']:>14.2f}x {'-':>13}")
        flops = r["beam5_gemm_flops_per_step"]
        steps = r["beam5_batch16"]["seconds_per_step"]
        rates = {n: flops / steps[n] / 1e9 for n in ("fairseq", "plugin", "int8")}
        print(f"{name:<24}   beam5_batch16 decoder GEMM GFLOP/s: fairseq {rates['fairseq']:.0f}, plugin {rates['plugin']:.0f} "
              f"({rates['plugin'] / peak['float32']:.0%} of the float32 peak), int8 {rates['int8']:.0f} "
              f"({rates['int8'] / peak['int8']:.0%} of the int8 peak)")
        floor = r["beam1_floor_s_per_step"]
        steps = r["beam1_batch1"]["seconds_per_step"]
        print(f"{name:<24}   beam1 ms/step: fairseq {steps['fairseq'] * 1e3:.2f}, plugin {steps['plugin'] * 1e3:.2f} "
              f"({steps['plugin'] / floor:.2f}x floor), int8 {steps['int8'] * 1e3:.2f}; "
              f"floor {floor * 1e3:.2f} = float32 decoder weights / copy bandwidth")


if __name__ == "__main__":
    main()
