"""onnxruntime (fconv-export, float32 and --int8) against the plugin in torch (float32 and
fconv-quantize's int8), side by side in one process.

Two models:
- the quickstart's trained model (``RUN``, e.g. examples/bible_es_en/runs/latest):
  its first test verses, tokenised and BPE-encoded once, sorted by length;
- ``fconv_wmt_en_de`` with random weights and a 40k vocabulary (as in bench_fconv.py),
  random sources of 12-24 tokens, every hypothesis run to a fixed 30 steps.

Each engine translates the same batches with the same search settings: torch through
fairseq's SequenceGenerator (as fairseq-generate and fairseq-interactive run it),
onnxruntime through fconv_onnx's beam search. Both get 2 threads. Engines take turns
within each repetition, the order alternating between repetitions; the report gives
medians and, per engine, how many best hypotheses equal torch float32's and torch's of
the same precision (onnx int8 against torch int8). Sizes: the
deployable directory against the torch checkpoint.

    .venv/bin/python benchmarks/bench_onnx.py examples/bible_es_en/runs/latest [--json]
    .venv/bin/python benchmarks/bench_onnx.py --quick     # a tiny run, the quickstart model only: checks that it runs
"""

import copy
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from bench_fconv import build_models, make_task, prepared_for_generation, source_batch  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

from fconv_onnx.beam_search import generate  # noqa: E402
from fconv_onnx.model import ExportedModel  # noqa: E402
from fconv_onnx.translate import pad_left  # noqa: E402
from fconv_plugin.export.main import export_model, load_model, parse_args as export_options  # noqa: E402

THREADS = 2
SETTINGS = {"beam5_batch16": (5, 16), "beam1_batch1": (1, 1)}
ENGINES = ("torch float32", "torch int8", "onnx float32", "onnx int8")


def load_quickstart(run_dir: Path):
    from fconv_plugin import compat

    compat.install()
    checkpoint = run_dir / "checkpoints" / "checkpoint_best.pt"
    model, task, _ = load_model(str(checkpoint), str(run_dir / "data-bin"))
    return model, task, checkpoint


def directory_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


class Engines:
    """The four engines of one model, each as ``translate(src_tokens, beam) -> best token lists``."""

    def __init__(self, model, task, arch, workdir: Path, text_options=(), max_len=(0.0, 200)):
        """``text_options``: fconv-export's tokenizer and BPE options, for a model that reads raw text."""
        self.task, self.max_len = task, max_len
        model = model.float()
        model.eval()  # (a model fairseq prepared for generation returns None from eval())
        int8 = copy.deepcopy(model)
        int8.quantize_int8_()
        self.torch_models = {"torch float32": model, "torch int8": int8}
        self.exported = {}
        for name, quantized in (("onnx float32", False), ("onnx int8", True)):
            out = workdir / name.replace(" ", "_")
            options = export_options(["-", "-", str(out), *text_options] + (["--int8"] if quantized else []))
            export_model(model, task, str(out), options, arch)
            self.exported[name] = ExportedModel(str(out), threads=THREADS)
        self.directories = {name: workdir / name.replace(" ", "_") for name in self.exported}

    def translate(self, engine, src_tokens: torch.Tensor, beam: int):
        a, b = self.max_len
        if engine in self.torch_models:
            model = prepared_for_generation(self.torch_models[engine], beam)
            generator = SequenceGenerator([model], self.task.target_dictionary, beam_size=beam, max_len_a=a, max_len_b=b)
            sample = {"net_input": {"src_tokens": src_tokens, "src_lengths": src_tokens.ne(self.task.source_dictionary.pad()).sum(1)}}
            with torch.no_grad():
                return [hypos[0]["tokens"].tolist() for hypos in generator.generate([model], sample)]
        runtime = self.exported[engine]
        d = self.task.target_dictionary
        hypotheses = generate(runtime, src_tokens.numpy(), beam, eos=d.eos(), pad=d.pad(), unk=d.unk(), max_len_a=a,
                              max_len_b=b, max_positions=runtime.max_target_positions)
        return [h[0].tokens.tolist() for h in hypotheses]


def quickstart_batches(run_dir: Path, task, engines: Engines, verses: int, batch_size: int):
    """The first test verses through the export's own tokenizer and BPE, sorted by length, left-padded."""
    runtime = engines.exported["onnx float32"]
    lines = (run_dir / "test.raw.es").read_text(encoding="utf-8").splitlines()[:verses]
    encoded = sorted((runtime.source_vocabulary.encode(runtime.text.encode(line)) for line in lines), key=len)
    pad = task.source_dictionary.pad()
    return [torch.from_numpy(pad_left(encoded[i: i + batch_size], pad)) for i in range(0, len(encoded), batch_size)]


def measure(engines: Engines, batches_by_setting, repetitions: int):
    results = {}
    for setting, (beam, _) in SETTINGS.items():
        batches = batches_by_setting[setting]
        seconds = {name: [] for name in ENGINES}
        outputs = {}
        for name in ENGINES:  # untimed warm-up
            engines.translate(name, batches[0], beam)
        for repetition in range(repetitions):
            for name in harness.turns(ENGINES, repetition):
                start = time.perf_counter()
                outputs[name] = [hyp for batch in batches for hyp in engines.translate(name, batch, beam)]
                seconds[name].append(time.perf_counter() - start)
        sentences = sum(b.size(0) for b in batches)
        reference = outputs["torch float32"]
        results[setting] = {
            "sentences": sentences,
            "seconds": {n: statistics.median(s) for n, s in seconds.items()},
            "same_best_as_torch_float32": {n: sum(a == b for a, b in zip(outputs[n], reference)) for n in ENGINES},
            "same_best_as_torch_of_its_precision": {
                n: sum(a == b for a, b in zip(outputs[n], outputs["torch " + n.split()[-1]])) for n in ENGINES},
        }
    return results


def report(title, results, sizes):
    print(f"\n{title}")
    print(f"{'setting':<15} {'engine':<14} {'seconds':>8} {'sentences/s':>12} {'vs torch float32':>17} {'same best':>10} "
          f"{'same as torch of its precision':>31}")
    for setting, r in results.items():
        base = r["seconds"]["torch float32"]
        for name in ENGINES:
            s = r["seconds"][name]
            print(f"{setting:<15} {name:<14} {s:>8.2f} {r['sentences'] / s:>12.1f} {base / s:>16.2f}x "
                  f"{r['same_best_as_torch_float32'][name]:>5}/{r['sentences']} "
                  f"{r['same_best_as_torch_of_its_precision'][name]:>25}/{r['sentences']}")
    print("sizes: " + ", ".join(f"{k} {v / 2**20:.1f} MB" for k, v in sizes.items()))


def main(argv=None):
    parser = harness.arguments(__doc__)
    parser.add_argument("--verses", type=int, default=160, help="test verses for beam 5 x 16 (beam 1 x 1: a quarter)")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = harness.parse(parser, argv)
    if args.quick:
        args.verses = 16
    # a quick run's model (8 updates) writes to the length bound: --quick bounds it at 10 tokens
    bound = (0.0, 10) if args.quick else (0.0, 200)
    torch.set_num_threads(THREADS)
    print(f"{harness.machine()}, onnxruntime {__import__('onnxruntime').__version__}")
    everything = {}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run
        model, task, checkpoint = load_quickstart(run_dir)
        engines = Engines(model, task, "fconv_iwslt_de_en", Path(tmp) / "quickstart", max_len=bound,
                          text_options=("--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", str(run_dir / "codes")))
        batches = {"beam5_batch16": quickstart_batches(run_dir, task, engines, args.verses, 16),
                   "beam1_batch1": quickstart_batches(run_dir, task, engines, args.verses // 4, 1)}
        from fconv_plugin.cli.quantize import quantize_checkpoint

        here = os.getcwd()
        os.chdir(run_dir)  # the checkpoint names its data-bin relative to the run
        try:
            quantize_checkpoint(str(checkpoint), os.path.join(tmp, "int8.pt"))
        finally:
            os.chdir(here)
        sizes = {"checkpoint_best.pt": checkpoint.stat().st_size,
                 "fconv-quantize checkpoint": os.path.getsize(os.path.join(tmp, "int8.pt")),
                 **{f"{n} directory": directory_size(d) for n, d in engines.directories.items()}}
        results = measure(engines, batches, args.repeats)
        report(f"quickstart model ({run_dir.name}: fconv_iwslt_de_en, 5.1k/4.6k BPE vocabularies), test verses", results, sizes)
        everything["quickstart"] = {"results": results, "sizes": sizes}
        del engines
        if args.quick:
            print("fconv_wmt_en_de: left out by --quick")
            return

        wmt_task = make_task("fconv_wmt_en_de")
        wmt = build_models("fconv_wmt_en_de", wmt_task)["plugin"]
        engines = Engines(wmt, wmt_task, "fconv_wmt_en_de", Path(tmp) / "wmt", max_len=(0.0, 30))
        batches = {"beam5_batch16": [source_batch(wmt_task, 16, seed=1)["net_input"]["src_tokens"]],
                   "beam1_batch1": [source_batch(wmt_task, 1, seed=s)["net_input"]["src_tokens"] for s in range(4)]}
        results = measure(engines, batches, args.repeats)
        torch.save(wmt.state_dict(), os.path.join(tmp, "wmt.pt"))
        sizes = {"float32 weights (torch.save)": os.path.getsize(os.path.join(tmp, "wmt.pt")),
                 **{f"{n} directory": directory_size(d) for n, d in engines.directories.items()}}
        report("fconv_wmt_en_de (40k vocabulary, random weights, 30 steps per hypothesis)", results, sizes)
        everything["wmt"] = {"results": results, "sizes": sizes}
    if args.json:
        print(json.dumps(everything, indent=2))


if __name__ == "__main__":
    main()
