"""Where the training step's time goes, and what the candidate speed-ups give, side by side.

For one architecture (random weights, bench_fconv.py's training batch, 2 threads):
1. the profile of the plugin's forward + backward: the matrix products' share of the
   step's self time, and the ten largest operators;
2. the convolution three ways, forward + backward, at the architecture's widths:
   ``conv_tbc`` (what fairseq and the plugin run), ``conv1d`` (oneDNN) and one large
   product over unfolded windows (k · in wide);
3. the work between the products, per block: GLU + residual · √0.5 (eager and fused by
   torch.compile), a time-major/batch-major transpose, dropout;
4. the whole step eagerly and under torch.compile (inductor, static shapes), taking
   turns, with the compile time;
6. the loss over the vocabulary, what fairseq's label_smoothed_cross_entropy does with the
   decoder's logits (``--bf16``: bfloat16 logits, a float32 loss), without the profiler:
   each of its passes timed on its own (the cast, the log-softmax, the loss, their
   backwards), and the whole path in three forms taking turns: torch's (what runs), in row
   chunks that keep the float32 rows in cache, and under torch.compile (not with --quick);
7. (``--bf16``) the whole step with Adam's update, that path in three forms taking turns: torch's,
   the log-softmax in one compiled pass each way from the bfloat16 logits
   (``benchmarks/fused_log_softmax.cpp``, compiled here for this CPU), and the whole label-smoothed
   loss with its gradient in one compiled pass (``benchmarks/fused_label_smoothed_loss.cpp``, built
   with the loops' flags): what a second form of the loss path would pay end to end.

``--pace [SECONDS]`` measures instead how steady this machine's own speed is over minutes (part 8): the
same step on the same batch (``--bf16``: the mixed-precision one), over and over for SECONDS (default
480), timed in 10-second windows; the fastest, median and slowest window, and the first minute's
median against the rest's. A ``MINUTES=`` run's speed probe times seconds of training and the run
lasts minutes: where the machine's pace moves, the probe's expectation moves with it.

``--kernels`` adds part 0: which library kernel runs each matrix product of the step, and its
share, read from the libraries' own logs in a child process (``ONEDNN_VERBOSE=1`` names
oneDNN's implementation and ISA, e.g. ``brg_matmul:avx512_core_amx``; ``MKL_VERBOSE=1`` names
MKL's calls, and its banner the processor class it serves); what runs in neither is torch's own code.

``--allocator [RUN]`` measures instead what training's large tensors cost where each gets new pages
(``FCONV_ALLOCATOR=system``) against the plugin's reuse of freed memory (``fconv_plugin/host_memory.py``):
``fairseq-train`` on a quickstart run's data-bin (default ``examples/bible_es_en/runs/latest``),
the quickstart's model, batch (``--max-tokens 3000``) and recipe, ``--updates`` updates, each
setting in a process of its own, taking turns, in float32 and (a CPU with the units) bfloat16:
fairseq-train's own words/s and the process's peak resident memory, as ratios. ``--tcmalloc [RUN]``
does the same for glibc's heap kept for reuse (``FCONV_ALLOCATOR=reuse``) against tcmalloc, preloaded
as the examples start fairseq-train where it is installed (``FCONV_ALLOCATOR=tcmalloc``). ``--dropout [RUN]``
does the same in bfloat16 for its dropout's draws: torch's (``FCONV_DROPOUT=torch``) against
16-bit draws (``FCONV_DROPOUT=16bit``, ``fconv_plugin/modules/dropout.py``). ``--precision [RUN]``
(a CPU with bfloat16 units) compares fairseq-train in float32 with the same run under ``--bf16``.

``--bf16`` (a CPU with bfloat16 units) measures the mixed-precision step that
``fairseq-train --cpu --bf16`` trains (``FConvModel.compute_in_``): part 1 becomes the
step's self time by part (products, dropout, log-softmax, copies and casts, weight norm,
zero fills, the rest), float32 and bfloat16 side by side, parts 2-4 and 6 run in bfloat16, and part 7 is added.

    .venv/bin/python benchmarks/training_limits.py [--arch fconv_iwslt_de_en] [--bf16] [--kernels] [--vocabulary WORDS]
    .venv/bin/python benchmarks/training_limits.py --allocator [RUN] [--updates 120] [--repeats 2]
    .venv/bin/python benchmarks/training_limits.py --tcmalloc [RUN] [--updates 600] [--repeats 2]
    .venv/bin/python benchmarks/training_limits.py --dropout [RUN] [--updates 120] [--repeats 2]
    .venv/bin/python benchmarks/training_limits.py --precision [RUN] [--updates 120] [--repeats 2]
    .venv/bin/python benchmarks/training_limits.py --pace [SECONDS] [--bf16] [--train-batch 100 30]
    .venv/bin/python benchmarks/training_limits.py --quick    # parts 1-3 and 6 at few repetitions: checks that they run
"""

import argparse
import copy
import math
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_fconv as b  # noqa: E402
import harness  # noqa: E402

from fconv_plugin import backend, host_memory, precision  # noqa: E402
from fconv_plugin.errors import FConvError  # noqa: E402

MATRIX_PRODUCTS = ("aten::conv_tbc", "aten::addmm", "aten::mm", "aten::bmm", "aten::addmm_", "aten::conv_tbc_backward")
# the step's parts by operator (--bf16's table); what no part names is "the rest"
PARTS = {
    "matrix products (convolution taps, linear layers, attention)": MATRIX_PRODUCTS,
    # torch's Bernoulli draws, or the 16-bit draws' random words (their compare and product fall in "the rest")
    "dropout (its random mask and scaling)": ("aten::bernoulli_", "aten::div_", "aten::random_"),
    "log-softmax over the vocabulary, float32": ("aten::_log_softmax", "aten::_log_softmax_backward_data"),
    "copies and casts": ("aten::copy_", "aten::_to_copy"),
    "weight norm (w = g v / |v|)": ("aten::_weight_norm_interface", "aten::_weight_norm_interface_backward"),
    "zero fills": ("aten::fill_", "aten::zero_"),
}


REPETITIONS = 20
MIN_VOCABULARY = 5  # --vocabulary: fairseq's 4 special symbols and at least one word
PROFILED_STEPS = 3  # the training steps a profile averages over


def median_ms(fn, repetitions=None):
    repetitions = repetitions or REPETITIONS
    for _ in range(3):
        fn()
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def profiled_events(model, batch):
    """The profiler's per-operator totals over PROFILED_STEPS training steps, after two untimed ones."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(2):
        b.training_step(model, *batch)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(PROFILED_STEPS):
            b.training_step(model, *batch)
    return prof.key_averages()


def ms_per_step_by_part(events):
    """Self time per step (ms) of each of PARTS, of the rest, and in all."""
    by_part = {part: sum(e.self_cpu_time_total for e in events if e.key in ops) / PROFILED_STEPS / 1e3 for part, ops in PARTS.items()}
    total = sum(e.self_cpu_time_total for e in events) / PROFILED_STEPS / 1e3
    by_part["the rest"] = total - sum(by_part.values())
    by_part["the whole step"] = total
    return by_part


KERNEL_STEPS = 2  # the training steps whose kernels are logged, after one that is not


def log_kernels(model, batch) -> None:
    """In a child process with the libraries' logs on: KERNEL_STEPS steps, between markers on stdout."""
    for _ in range(1):
        b.training_step(model, *batch)
    print("KERNELS BEGIN", flush=True)
    started = time.perf_counter()
    for _ in range(KERNEL_STEPS):
        b.training_step(model, *batch)
    print(f"KERNELS END {(time.perf_counter() - started) / KERNEL_STEPS * 1e3:.3f}", flush=True)


def _mkl_ms(text: str) -> float:
    """MKL_VERBOSE's time of a call ("35.21us", "1.2ms", "2.1s", "80ns") in milliseconds."""
    for unit, scale in (("ns", 1e-6), ("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(f"MKL_VERBOSE gave a time of {text!r}")


def kernel_census(log: str):
    """(ms per step by (library, kernel, shapes), the step's ms, MKL's instruction set) from a child's log."""
    lines = log.split("KERNELS BEGIN", 1)[1].splitlines()
    step_ms = float(next(line for line in lines if line.startswith("KERNELS END")).split()[2])
    isa = next((line.split("MKL_VERBOSE", 1)[1].strip() for line in log.splitlines()
                if line.startswith("MKL_VERBOSE") and "Intel(R)" in line), "MKL did not say")
    kernels = {}
    for line in lines:
        if line.startswith("onednn_verbose") and ",exec," in line:
            fields = line.split(",")
            at = fields.index("exec")
            kind, implementation, shapes, ms = fields[at + 2], fields[at + 3], fields[-2], float(fields[-1])
            key = ("oneDNN", f"{kind} {implementation}", shapes)
        elif line.startswith("MKL_VERBOSE") and "(" in line:
            call, rest = line.split("MKL_VERBOSE", 1)[1].strip().split("(", 1)
            arguments, timing = rest.rsplit(")", 1)
            ms = _mkl_ms(timing.split()[0])
            key = ("MKL", call, ",".join(arguments.split(",")[:5]))
        else:
            continue
        kernels[key] = kernels.get(key, 0.0) + ms / KERNEL_STEPS
    return kernels, step_ms, isa


def kernels_of_the_step(arch: str, bf16: bool, threads: int, vocabulary: Optional[int] = None) -> None:
    """Part 0: the library kernels of the step's products, float32 (and bfloat16), their share."""
    import os
    import subprocess

    for mixed in ([False, True] if bf16 else [False]):
        env = {**os.environ, "ONEDNN_VERBOSE": "1", "MKL_VERBOSE": "1"}
        child = subprocess.run([sys.executable, __file__, "--kernels-child", "--arch", arch, "--threads", str(threads),
                                "--train-batch", *map(str, b.TRAIN_BATCH)]
                               + (["--bf16"] if mixed else []) + (["--vocabulary", str(vocabulary)] if vocabulary else []),
                               capture_output=True, text=True, env=env)
        if child.returncode != 0:
            raise SystemExit(f"the kernels' child process failed:\n{child.stderr[-3000:]}")
        kernels, step_ms, isa = kernel_census(child.stdout)
        by_kernel = {}
        for (library, kernel, _), ms in kernels.items():
            by_kernel[(library, kernel)] = by_kernel.get((library, kernel), 0.0) + ms
        logged = sum(by_kernel.values())
        print(f"0. {'bfloat16' if mixed else 'float32'} step {step_ms:.1f} ms (its own kernels logged); MKL's banner: {isa}")
        for (library, kernel), ms in sorted(by_kernel.items(), key=lambda item: -item[1])[:8]:
            print(f"     {library:<6} {kernel:<58} {ms:8.2f} ms  {ms / step_ms:5.1%}")
        print(f"     {'':6} {'in these libraries, all':<58} {logged:8.2f} ms  {logged / step_ms:5.1%}")


def profile_by_part(models, batch):
    """Part 1 under --bf16: float32's and bfloat16's profiles, part by part, side by side."""
    parts = {name: ms_per_step_by_part(profiled_events(model, batch)) for name, model in models.items()}
    fp32, bf16 = parts["float32"], parts["bfloat16"]
    print("1. profile, self time per step (ms), float32 | bfloat16 | float32/bfloat16 | bfloat16 share:")
    for part in fp32:
        print(f"     {part:<62} {fp32[part]:8.1f} | {bf16[part]:8.1f} | {fp32[part] / max(bf16[part], 1e-9):5.2f}x"
              f" | {bf16[part] / bf16['the whole step']:4.0%}")


def profile_step(model, batch):
    events = profiled_events(model, batch)
    total = sum(e.self_cpu_time_total for e in events)
    products = sum(e.self_cpu_time_total for e in events if e.key in MATRIX_PRODUCTS)
    print(f"1. profile: matrix products {products / total:.0%} of the step's self time; largest operators:")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:10]:
        print(f"     {e.key:<36} {e.self_cpu_time_total / total:6.1%}")


def convolutions(time_steps, batch, in_channels, out_channels, kernel, dtype=torch.float32):
    x = torch.randn(time_steps, batch, in_channels, dtype=dtype, requires_grad=True)
    w = torch.randn(kernel, in_channels, out_channels, dtype=dtype, requires_grad=True)
    bias = torch.randn(out_channels, dtype=dtype, requires_grad=True)
    grad = torch.randn(time_steps, batch, out_channels, dtype=dtype)
    pad = kernel // 2

    def conv_tbc():
        torch.conv_tbc(x, w, bias, pad).backward(grad)

    def conv1d():
        F.conv1d(x.permute(1, 2, 0), w.permute(2, 1, 0), bias, padding=pad).permute(2, 0, 1).backward(grad)

    def unfolded():
        windows = F.pad(x, (0, 0, 0, 0, pad, pad)).unfold(0, kernel, 1).permute(0, 1, 3, 2)
        out = torch.addmm(bias, windows.reshape(time_steps * batch, -1), w.reshape(-1, out_channels))
        out.view(time_steps, batch, out_channels).backward(grad)

    times = {name: median_ms(fn) for name, fn in (("conv_tbc", conv_tbc), ("conv1d", conv1d), ("unfolded", unfolded))}
    flops = 6 * time_steps * batch * kernel * in_channels * out_channels
    print(f"2. convolution {time_steps}x{batch}x{in_channels} -> {out_channels}, k={kernel}, {dtype}, forward + backward: "
          + ", ".join(f"{n} {t:.2f} ms ({flops / t / 1e6:.0f} GFLOP/s)" for n, t in times.items()))


def between_products(time_steps, batch, channels, dtype=torch.float32):
    a = torch.randn(time_steps, batch, 2 * channels, dtype=dtype, requires_grad=True)
    r = torch.randn(time_steps, batch, channels, dtype=dtype, requires_grad=True)
    x = torch.randn(time_steps, batch, channels, dtype=dtype, requires_grad=True)
    grad = torch.randn(time_steps, batch, channels, dtype=dtype)
    fused = torch.compile(lambda a, r: (F.glu(a, dim=-1) + r) * math.sqrt(0.5))
    times = {
        "GLU + residual, eager": median_ms(lambda: ((F.glu(a, dim=-1) + r) * math.sqrt(0.5)).backward(grad)),
        "GLU + residual, torch.compile": median_ms(lambda: fused(a, r).backward(grad)),
        "transpose to batch-major": median_ms(lambda: x.transpose(0, 1).contiguous().backward(grad.transpose(0, 1))),
        "dropout 0.1": median_ms(lambda: F.dropout(x, 0.1, True).backward(grad)),
    }
    print(f"3. per block ({time_steps}x{batch}x{channels}, {dtype}), forward + backward: "
          + ", ".join(f"{n} {t:.3f} ms" for n, t in times.items()))


def compiled_step(model, batch, repetitions=6):
    eager, compiled_model = model, copy.deepcopy(model)
    compiled = torch.compile(compiled_model, dynamic=False)
    start = time.perf_counter()
    b.training_step(compiled, *batch)
    compile_seconds = time.perf_counter() - start
    b.training_step(eager, *batch)
    times = {"eager": [], "torch.compile": []}
    for repetition in range(repetitions):
        for name in harness.turns(list(times), repetition):
            start = time.perf_counter()
            b.training_step(eager if name == "eager" else compiled, *batch)
            times[name].append(time.perf_counter() - start)
    medians = {n: statistics.median(t) for n, t in times.items()}
    print(f"4. training step: eager {medians['eager'] * 1e3:.0f} ms, torch.compile {medians['torch.compile'] * 1e3:.0f} ms "
          f"({medians['eager'] / medians['torch.compile']:.2f}x), first compiled step (compiling) {compile_seconds:.0f} s")
    return medians


LOSS_ROWS = 128  # the row chunk of part 6's chunked form (128 x 8,000 float32 = 4 MB, in the L3 cache)


class ChunkedLogSoftmax(torch.autograd.Function):
    """Part 6's candidate: float32 log-softmax of (bfloat16) logits a chunk of rows at a time, each chunk's
    float32 copy and gradient in cache; the same values as ``torch.log_softmax(logits.float(), -1)``."""

    @staticmethod
    def forward(ctx, logits):
        rows = logits.reshape(-1, logits.size(-1))
        out = torch.empty(rows.shape, dtype=torch.float32)
        for start in range(0, rows.size(0), LOSS_ROWS):
            torch.log_softmax(rows[start:start + LOSS_ROWS].float(), -1, out=out[start:start + LOSS_ROWS])
        ctx.save_for_backward(out)
        ctx.logits_dtype, ctx.logits_shape = logits.dtype, logits.shape
        return out.view(logits.shape)

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        grad = grad.reshape(out.shape)  # rows x vocabulary
        grad_logits = torch.empty(out.shape, dtype=ctx.logits_dtype)
        for start in range(0, out.size(0), LOSS_ROWS):
            chunk = slice(start, start + LOSS_ROWS)
            grad_logits[chunk].copy_(torch._log_softmax_backward_data(grad[chunk], out[chunk], -1, torch.float32))
        return grad_logits.view(ctx.logits_shape)


def label_smoothed_loss(lprobs, target, epsilon=0.1):
    """fairseq's label_smoothed_nll_loss as its criterion calls it (no padding in the bench's batch)."""
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    return label_smoothed_nll_loss(lprobs.view(-1, lprobs.size(-1)), target.view(-1), epsilon)[0]


def loss_over_the_vocabulary(model, batch, repetitions, compile_too=True):
    """Part 6: the path from the decoder's logits to the loss and back, pass by pass and in three forms."""
    sample, prev, target = batch
    with torch.no_grad():
        logits = model(sample["src_tokens"], sample["src_lengths"], prev)[0]
    logits = logits.detach().requires_grad_()
    timer = time.perf_counter
    passes = {name: [] for name in ("cast to float32", "log-softmax", "loss", "loss backward", "log-softmax backward",
                                    "cast back")}
    for _ in range(max(repetitions, 3)):
        moments = [timer()]
        as_float = logits.detach().float()
        moments.append(timer())
        lprobs = torch.log_softmax(as_float.requires_grad_(), -1)
        moments.append(timer())
        loss = label_smoothed_loss(lprobs, target)
        moments.append(timer())
        grad_lprobs = torch.autograd.grad(loss, lprobs, retain_graph=True)[0]
        moments.append(timer())
        grad_float = torch._log_softmax_backward_data(grad_lprobs, lprobs.detach(), -1, torch.float32)
        moments.append(timer())
        grad_float.to(logits.dtype)
        moments.append(timer())
        for name, begin, end in zip(passes, moments, moments[1:]):
            passes[name].append((end - begin) * 1e3)
    forms = {"torch's": lambda x: torch.log_softmax(x.float(), -1), "in row chunks": ChunkedLogSoftmax.apply}
    if compile_too:
        forms["torch.compile"] = torch.compile(forms["torch's"], dynamic=True)

    def call(form):
        logits.grad = None  # each call's gradient is new, none accumulated into the last one
        label_smoothed_loss(form(logits), target).backward()
        return logits.grad

    calls = {name: (lambda form=form: call(form)) for name, form in forms.items()}
    gradients = {name: fn() for name, fn in calls.items()}  # warm (and compile) each; the gradients they give
    largest = gradients["torch's"].abs().max()
    if not torch.equal(gradients["torch's"], gradients["in row chunks"]) or any(
            (gradient - gradients["torch's"]).abs().max() > 0.01 * largest for gradient in gradients.values()):
        raise SystemExit("6. a candidate gave other gradients than torch's (the chunks must give the same, torch.compile "
                         "within 1% of the largest): it is no candidate")
    times = {name: statistics.median(seconds) * 1e3 for name, seconds in harness.take_turns(calls, max(repetitions, 4)).items()}
    reference = times["torch's"]
    print(f"6. the loss over the vocabulary ({tuple(logits.shape)}, {logits.dtype} logits, fairseq's label-smoothed loss), "
          "median ms, no profiler: " + ", ".join(f"{n} {statistics.median(t):.1f}" for n, t in passes.items()))
    print("     the whole path, forward + backward (the chunks' gradients equal torch's), taking turns: "
          + ", ".join(f"{n} {t:.1f} ms ({reference / t:.2f}x)" for n, t in times.items()))


def compiled_candidate(name: str, flags=()):
    """A part-7 candidate, ``benchmarks/<name>.cpp``, compiled here by the compiled loops' build (their flags,
    OpenMP, and ``flags``) and loaded."""
    import importlib.util
    import tempfile

    from fconv_plugin.native.build import OPENMP, compile_extension

    with tempfile.TemporaryDirectory() as scratch:  # the module stays loaded once its file is gone
        built = compile_extension(name, str(Path(__file__).resolve().parent / f"{name}.cpp"), OPENMP + list(flags),
                                  scratch)
        spec = importlib.util.spec_from_file_location(name, built)
        kernels = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(kernels)
    return kernels


def fused_log_softmax():
    """Part 7's first candidate: benchmarks/fused_log_softmax.cpp with -march=native besides the loops' flags
    (the loops are built for any CPU of their class: this is the candidate's best case), as an autograd
    function of bfloat16 logits giving float32 log-probabilities."""
    kernels = compiled_candidate("fused_log_softmax", ["-march=native"])

    class FusedLogSoftmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits):
            out = kernels.forward(logits.reshape(-1, logits.size(-1)).contiguous())
            ctx.save_for_backward(out)
            return out.view(logits.shape)

        @staticmethod
        def backward(ctx, grad):
            (out,) = ctx.saved_tensors
            return kernels.backward(grad.reshape(out.shape).contiguous(), out).view(grad.shape)

    return FusedLogSoftmax.apply


NO_PADDING = -1  # the ignore_index the fused loss is given: the bench's targets are never padding (part 7 calls
# fairseq's label_smoothed_nll_loss without one; fairseq-train's criterion passes its padding index)


def fused_label_smoothed_loss():
    """Part 7's second candidate: benchmarks/fused_label_smoothed_loss.cpp with the loops' flags alone (the form
    the plugin would ship), as an autograd function of bfloat16 logits and targets giving fairseq's label-smoothed
    loss; its gradient comes from the forward pass, where the kernel computes it beside the loss."""
    kernels = compiled_candidate("fused_label_smoothed_loss")

    class FusedLabelSmoothedLoss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, target, epsilon):
            sums, gradient = kernels.label_smoothed_loss(logits.reshape(-1, logits.size(-1)).contiguous(),
                                                         target.reshape(-1).contiguous(), epsilon, NO_PADDING,
                                                         ctx.needs_input_grad[0])
            ctx.save_for_backward(gradient)  # None where no gradient was asked for
            ctx.logits_shape = logits.shape
            return sums[0].float()

        @staticmethod
        def backward(ctx, grad):
            (gradient,) = ctx.saved_tensors
            if not bool(grad == 1):  # a scaled loss; fairseq-train's bfloat16 on the CPU scales none
                gradient = (gradient.float() * grad).to(gradient.dtype)
            return gradient.view(ctx.logits_shape), None, None

    return lambda logits, target, epsilon=0.1: FusedLabelSmoothedLoss.apply(logits, target, epsilon)


def step_with_the_fused_loss_path(model, batch, repetitions):
    """Part 7 (bfloat16): the whole training step (forward, backward and Adam's update, as fairseq-train takes it)
    with fairseq's label-smoothed loss in three forms, taking turns: torch's (cast, log-softmax, the loss, their
    backwards, cast back), the log-softmax in one compiled pass each way, and the whole loss and its gradient in
    one compiled pass: what a second form of the loss path would pay end to end (the bar: 10%)."""
    sample, prev, target = batch
    losses = {"torch's": lambda logits: label_smoothed_loss(torch.log_softmax(logits.float(), -1), target)}
    candidates = {  # name: its source, how it is built, the loss its form gives
        "log-softmax fused": ("fused_log_softmax.cpp", fused_log_softmax,
                              lambda form: lambda logits: label_smoothed_loss(form(logits), target)),
        "loss fused": ("fused_label_smoothed_loss.cpp", fused_label_smoothed_loss,
                       lambda form: lambda logits: form(logits, target)),
    }
    for name, (source, build, loss_of) in candidates.items():
        try:
            form = build()
        except Exception as error:  # no compiler, or one without OpenMP (at::parallel_for would run on one thread)
            lines = [line for line in str(error).splitlines() if line.strip()]
            print(f"7. not run: benchmarks/{source} did not compile here ({type(error).__name__}: "
                  f"{lines[0] if lines else ''}); the candidates need a C++ compiler with OpenMP")
            return
        losses[name] = loss_of(form)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-9)  # fairseq-train's update; the weights barely move

    def step(loss):
        model.zero_grad(set_to_none=True)
        loss(model(sample["src_tokens"], sample["src_lengths"], prev)[0]).backward()
        optimizer.step()

    with torch.no_grad():
        logits = model(sample["src_tokens"], sample["src_lengths"], prev)[0]
    gradients, values = {}, {}
    for name, loss in losses.items():
        leaf = logits.detach().requires_grad_()
        value = loss(leaf)
        value.backward()
        gradients[name], values[name] = leaf.grad.float(), value.item()
    gaps = {}
    for name in ("log-softmax fused", "loss fused"):
        gaps[name] = ((gradients[name] - gradients["torch's"]).abs().max() / gradients["torch's"].abs().max()).item()
        if gaps[name] > 0.01 or abs(values[name] - values["torch's"]) > 1e-5 * abs(values["torch's"]):
            raise SystemExit(f"7. the {name} form's loss or gradient is not torch's (losses {values}; gradient "
                             f"{gaps[name]:.1%} of the largest away): no candidate")
    for loss in losses.values():  # untimed: Adam's state, each form's first allocations
        step(loss)
    times = {name: statistics.median(seconds) * 1e3 for name, seconds in
             harness.take_turns({name: (lambda loss=loss: step(loss)) for name, loss in losses.items()},
                                max(repetitions, 4)).items()}
    reference = times["torch's"]
    print(f"7. the training step with Adam, the loss over the vocabulary three ways (benchmarks/fused_log_softmax.cpp, "
          f"benchmarks/fused_label_smoothed_loss.cpp; gradients within {max(gaps.values()):.1e} x the largest of "
          f"torch's), taking turns: torch's {reference:.1f} ms, log-softmax fused {times['log-softmax fused']:.1f} ms "
          f"({reference / times['log-softmax fused']:.3f}x), loss fused {times['loss fused']:.1f} ms "
          f"({reference / times['loss fused']:.3f}x)")


TRAIN_RUN = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:], stdout=open(sys.argv[1] + ".log", "w"), stderr=subprocess.STDOUT)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)
"""


@dataclass(frozen=True)
class Comparison:
    """Two settings of one switch, each fairseq-train child under one: ``says`` is how its log names the setting
    it ran under (the benchmark refuses a child that does not), in the plugin's own words."""

    title: str
    switch: Optional[str]  # the environment variable set to each setting; None: ``options`` alone tell them apart
    settings: tuple  # (before, after): the reference first
    says: dict
    precisions: tuple
    options: dict = field(default_factory=dict)  # fairseq-train's extra options under each setting
    preloaded: tuple = ()  # the settings whose child starts with the allocator the examples preload (LD_PRELOAD)


# what else decides malloc's behaviour in a child: left out, so that each child measures the setting alone
OTHER_ALLOCATOR_VARIABLES = ("GLIBC_TUNABLES", "LD_PRELOAD")
ALLOCATOR = Comparison(
    "FCONV_ALLOCATOR=system (new pages for each large tensor) against reuse (the plugin's)", host_memory.SWITCH,
    ("system", "reuse"),
    # how fairseq-train's log begins the line of each setting (compat/cpu_training_memory, in host_memory's words)
    {"system": f"training on the CPU: {host_memory.SWITCH}=system", "reuse": f"training on the CPU: {host_memory.KEPT}"},
    ("float32", "bfloat16"))
TCMALLOC = Comparison(
    "FCONV_ALLOCATOR=reuse (glibc's heap kept) against tcmalloc (preloaded, as the examples start fairseq-train)",
    host_memory.SWITCH, ("reuse", "tcmalloc"),
    {"reuse": f"training on the CPU: {host_memory.KEPT}", "tcmalloc": f"training on the CPU: {host_memory.SERVED}"},
    ("float32", "bfloat16"), preloaded=("tcmalloc",))
# the same model, data and batch in float32 and in mixed precision (fairseq-train --cpu --bf16: FConvModel.compute_in_)
PRECISION = Comparison(
    "float32 against --bf16 (bfloat16 products, float32 weights)", None, ("float32", "bfloat16"),
    {"float32": "", "bfloat16": "fconv_plugin: --bf16 on the CPU"}, ("bfloat16",),
    {"float32": (), "bfloat16": ("--bf16",)})
DROPOUT = Comparison(
    f"{backend.DROPOUT_SWITCH}=torch (torch's Bernoulli draws) against 16bit (16-bit draws)", backend.DROPOUT_SWITCH,
    ("torch", "16bit"), {name: f"; dropout: {draws}" for name, draws in backend.DROPOUT_SETTINGS.items()},
    ("bfloat16",))


def fairseq_train_turns(run: Path, updates: int, repeats: int, comparison: Comparison) -> None:
    """fairseq-train under each of ``comparison``'s two settings, taking turns: its words/s and peak memory."""
    import os
    import re
    import subprocess
    import tempfile

    data_bin = run / "data-bin"
    if not data_bin.is_dir():
        raise SystemExit(f"{run} has no data-bin: run bash {harness.QUICKSTART.relative_to(harness.ROOT)} first, or pass --quick")
    train = [str(harness.BIN / "fairseq-train"), str(data_bin), "--user-dir", str(harness.ROOT / "fconv_plugin"),
             "--arch", "fconv_iwslt_de_en", "--max-tokens", "3000", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)",
             "--clip-norm", "0.1", "--lr", "0.003", "--dropout", "0.1", "--criterion", "label_smoothed_cross_entropy",
             "--label-smoothing", "0.1", "--cpu", "--max-update", str(updates), "--no-save", "--disable-validation",
             "--seed", "1", "--required-batch-size-multiple", "1", "--log-format", "simple", "--num-workers", "0"]
    before, after = comparison.settings
    precisions = [name for name in comparison.precisions if name == "float32" or precision.bf16_units()]
    if not precisions:
        raise SystemExit(f"{comparison.switch or '--bf16'} sets bfloat16's training; this CPU has no bfloat16 units "
                         f"({precision.UNIT_NAMES}): nothing to compare here; run it on a CPU that has them")
    print(f"5. fairseq-train, {updates} updates on {data_bin}, the quickstart's model and batch; "
          f"{comparison.title}, {repeats} turns each:")
    try:
        preload = host_memory.training_preload() if comparison.preloaded else None
    except FConvError as refusal:  # FCONV_ALLOCATOR=tcmalloc where it is missing, or a value it does not take
        raise SystemExit(f"training_limits: {refusal}")
    if comparison.preloaded and preload is None:  # the switch is set for each child: only a missing library stops it
        preload = host_memory.tcmalloc_installed()
        if preload is None:
            raise SystemExit("training_limits: tcmalloc is not installed here: apt-get install libtcmalloc-minimal4")
    environment = {k: v for k, v in os.environ.items()
                   if k not in OTHER_ALLOCATOR_VARIABLES + (backend.DROPOUT_SWITCH,) and not k.startswith("MALLOC_")}
    with tempfile.TemporaryDirectory() as scratch:
        for name in precisions:
            words, peaks = {s: [] for s in comparison.settings}, {s: [] for s in comparison.settings}
            for repeat in range(repeats):
                for setting in harness.turns(comparison.settings, repeat):
                    log = Path(scratch) / f"{name}-{setting}-{repeat}"
                    switched = {comparison.switch: setting} if comparison.switch else {}
                    if setting in comparison.preloaded:
                        switched["LD_PRELOAD"] = preload
                    asked = comparison.options.get(setting, ("--bf16",) if name == "bfloat16" else ())
                    child = subprocess.run([sys.executable, "-c", TRAIN_RUN, str(log), *train, *asked],
                                           capture_output=True, text=True, env={**environment, **switched})
                    text = Path(str(log) + ".log").read_text() if Path(str(log) + ".log").exists() else ""
                    if child.returncode != 0 or child.stdout.split()[-1:] != ["0"]:
                        raise SystemExit(f"fairseq-train failed ({setting}, {name}):\n{child.stderr[-1000:]}{text[-3000:]}")
                    peak_kb = child.stdout.split()[-2]
                    said = comparison.says[setting]
                    if said not in text:  # the setting measured is the one the plugin applied
                        raise SystemExit(f"fairseq-train ({setting}, {name}) did not log {said!r}:\n{text[-3000:]}")
                    others = [s for s in comparison.settings if s != setting and comparison.says[s]
                              and comparison.says[s] not in comparison.says[setting]]
                    if any(comparison.says[other] in text for other in others):
                        raise SystemExit(f"fairseq-train ({setting}, {name}) logged another setting's line:\n{text[-3000:]}")
                    speeds = re.findall(r"\| train \| .*?\| wps ([\d.]+)", text)
                    if not speeds:
                        raise SystemExit(f"fairseq-train ({setting}, {name}) logged no epoch's words/s:\n{text[-3000:]}")
                    words[setting].append(float(speeds[-1]))
                    peaks[setting].append(int(peak_kb) / 1024)
            speed = {s: statistics.median(v) for s, v in words.items()}
            peak = {s: max(v) for s, v in peaks.items()}
            print(f"     {name}: words/s {speed[before]:.0f} -> {speed[after]:.0f} ({speed[after] / speed[before]:.2f}x); "
                  f"peak resident memory {peak[before]:.0f} -> {peak[after]:.0f} MB ({peak[after] / peak[before]:.2f}x)")


PACE_WINDOW = 10.0  # seconds a window of part 8 (--pace) lasts


def machine_pace(model, batch, seconds: float, window: float = PACE_WINDOW) -> None:
    """Part 8 (``--pace``): the same training step on the same batch, over and over for ``seconds``,
    timed in windows: the machine's own pace over minutes, which a speed probe of seconds cannot foresee."""
    b.training_step(model, *batch)  # the first call's allocations, untimed
    step_ms, started = [], time.perf_counter()
    while time.perf_counter() - started < seconds:
        opened, steps = time.perf_counter(), 0
        while steps == 0 or time.perf_counter() - opened < window:
            b.training_step(model, *batch)
            steps += 1
        step_ms.append((time.perf_counter() - opened) / steps * 1e3)
        print(f"   window {len(step_ms)}: {step_ms[-1]:.1f} ms a step", file=sys.stderr, flush=True)  # minutes pass
    print(f"8. the machine's pace: the same step, {len(step_ms)} windows of {window:.0f} s over "
          f"{time.perf_counter() - started:.0f} s, ms a step: " + " ".join(f"{ms:.0f}" for ms in step_ms))
    print("   " + pace_summary(step_ms, window))


def pace_summary(step_ms, window: float) -> str:
    """Part 8's summary of its windows (ms a step each, in order): the fastest, median and slowest, and
    the first minute's windows (60 s of them) against the rest's."""
    first = max(1, round(60.0 / window))
    head, rest = step_ms[:first], step_ms[first:]
    said = (f"fastest {min(step_ms):.1f}, median {statistics.median(step_ms):.1f}, slowest {max(step_ms):.1f} "
            f"({max(step_ms) / min(step_ms):.2f}x the fastest); the first minute's median {statistics.median(head):.1f}")
    if rest:
        said += f", the rest's {statistics.median(rest):.1f} ({statistics.median(rest) / statistics.median(head):.3f}x)"
    return said


def main(argv=None):
    global REPETITIONS
    parser = harness.arguments(__doc__, run=False)
    parser.set_defaults(repeats=6)
    parser.add_argument("--arch", default="fconv_iwslt_de_en")
    parser.add_argument("--bf16", action="store_true", help="the mixed-precision step (fairseq-train --cpu --bf16) beside float32's")
    parser.add_argument("--kernels", action="store_true", help="part 0: the library kernels of each product")
    parser.add_argument("--train-batch", nargs=2, type=int, metavar=("SENTENCES", "TOKENS"), default=list(b.TRAIN_BATCH),
                        help="the step's batch (default bench_fconv.py's; 100 30 is about fairseq-train's --max-tokens 3000)")
    parser.add_argument("--vocabulary", type=int, default=None, metavar="WORDS",
                        help="the source and target vocabularies: the logits' width (default bench_fconv.py's for the "
                             "arch; the quickstart's target side is about 4,600)")
    parser.add_argument("--allocator", nargs="?", const=str(harness.LATEST), metavar="RUN",
                        help="part 5 alone: fairseq-train with and without the reuse of freed memory, on RUN's data-bin")
    parser.add_argument("--tcmalloc", nargs="?", const=str(harness.LATEST), metavar="RUN",
                        help="part 5 alone: fairseq-train with glibc's heap kept and with tcmalloc preloaded, on RUN's data-bin")
    parser.add_argument("--dropout", nargs="?", const=str(harness.LATEST), metavar="RUN",
                        help="part 5 alone: fairseq-train --bf16 with torch's dropout draws and with 16-bit draws, on RUN's data-bin")
    parser.add_argument("--precision", nargs="?", const=str(harness.LATEST), metavar="RUN",
                        help="part 5 alone: fairseq-train in float32 and with --bf16, on RUN's data-bin")
    parser.add_argument("--updates", type=int, default=120,
                        help="--allocator, --tcmalloc, --dropout, --precision: fairseq-train's updates per run")
    parser.add_argument("--pace", nargs="?", type=float, const=480.0, metavar="SECONDS",
                        help="part 8 alone: the same step timed in 10-second windows for SECONDS (default 480; "
                             "--quick: 3 windows of a second); set --threads to the threads fairseq-train uses "
                             "(torch's default: one a core)")
    parser.add_argument("--kernels-child", action="store_true", help=argparse.SUPPRESS)
    args = harness.parse(parser, argv)
    # part 5's comparisons by their flags: the RUN each was asked for (None: not asked)
    comparisons = {"--allocator": (args.allocator, ALLOCATOR), "--tcmalloc": (args.tcmalloc, TCMALLOC),
                   "--dropout": (args.dropout, DROPOUT), "--precision": (args.precision, PRECISION)}
    asked_comparisons = [flag for flag, (asked, _) in comparisons.items() if asked]
    if args.vocabulary is not None and asked_comparisons:
        parser.error(f"--vocabulary sets the step's batch of parts 0-7; {asked_comparisons[0]} trains on a run's "
                     f"data-bin, whose dictionary decides: drop --vocabulary")
    if args.vocabulary is not None and args.vocabulary < MIN_VOCABULARY:
        parser.error(f"--vocabulary takes {MIN_VOCABULARY} words or more (fairseq's dictionary holds 4 special symbols, "
                     f"and the batch draws its words from the rest)")
    if args.pace is not None:
        if not math.isfinite(args.pace) or args.pace < PACE_WINDOW:
            parser.error(f"--pace takes the seconds to measure for, {PACE_WINDOW:.0f} (one window) or more")
        alone = [flag for flag, (asked, _) in comparisons.items() if asked] + (["--kernels"] if args.kernels else [])
        if alone:
            parser.error(f"--pace runs alone: drop {' and '.join(alone)}, or run them apart")
    if args.bf16:
        try:
            precision.check_cpu_bf16(precision.bf16_units(), "--bf16")  # training's own refusal
        except FConvError as refusal:
            parser.error(str(refusal))
    for asked, comparison in comparisons.values():
        if asked:
            print(harness.machine())
            run = harness.quick_run() if args.quick else Path(asked).resolve()
            fairseq_train_turns(run, 4 if args.quick else args.updates, args.repeats, comparison)
            return
    torch.set_num_threads(args.threads)
    b.TRAIN_BATCH = tuple(args.train_batch)  # every part measures at this batch
    if args.quick:
        REPETITIONS = 2
    task = b.make_task(args.arch, args.vocabulary)
    model = b.build_models(args.arch, task)["plugin"]
    model.train()
    batch = b.training_batch(task)
    sentences, length = b.TRAIN_BATCH
    plan = model.encoder.plans[0]
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    if args.kernels_child:
        host_memory.keep_freed_memory()
        log_kernels(b.with_bf16({"plugin": model}, side_by_side=False)["plugin bf16"] if args.bf16 else model, batch)
        return
    memory = host_memory.keep_freed_memory()  # as fairseq-train does with the plugin's model on the CPU
    print(f"{args.arch}, batch {sentences} x {length} tokens, {len(task.target_dictionary)} target words; "
          f"{harness.machine()}; training memory: {memory}")
    if args.pace is not None:
        if args.bf16:
            model = b.with_bf16({"plugin": model}, side_by_side=False)["plugin bf16"]
        # --quick: three windows of a second, to check that it runs
        machine_pace(model, batch, 3.0 if args.quick else args.pace, 1.0 if args.quick else PACE_WINDOW)
        return
    if args.kernels:
        kernels_of_the_step(args.arch, args.bf16, args.threads, args.vocabulary)
    if args.bf16:
        mixed = b.with_bf16({"plugin": model}, side_by_side=False)["plugin bf16"]  # bench_fconv's mixed-precision copy
        profile_by_part({"float32": model, "bfloat16": mixed}, batch)
        model = mixed
    else:
        profile_step(model, batch)
    convolutions(length, sentences, plan.in_channels, 2 * plan.out_channels, plan.kernel_size, dtype)
    between_products(length, sentences, plan.out_channels, dtype)
    if args.quick:
        print("4. training step under torch.compile: left out by --quick (compiling takes minutes)")
    else:
        compiled_step(model, batch, args.repeats)
    loss_over_the_vocabulary(model, batch, REPETITIONS, compile_too=not args.quick)
    if args.bf16:
        step_with_the_fused_loss_path(model, batch, args.repeats)


if __name__ == "__main__":
    main()
