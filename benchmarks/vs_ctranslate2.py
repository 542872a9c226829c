"""The quickstart's ConvS2S against the engine a CPU user would pick instead: a fairseq
Transformer of the same size run through CTranslate2, side by side in one run.

On a quickstart run (``examples/bible_es_en/runs/latest``), with its data-bin, BPE codes
and training budget:

1. trains a fairseq Transformer (3 + 3 layers, 256 wide, 4 heads, 1024-wide feed-forward)
   on the same data-bin with the same batch (--max-tokens 3000) and the same number of
   updates as the quickstart, then on to 3x as many (one run, inverse-sqrt schedule, so
   the checkpoint at the quickstart's updates is that budget's model), and converts it
   with ``ct2-fairseq-converter`` (the library's FairseqConverter);
2. translates the run's 500 test verses with every engine, at beam 5 x 16 (calls of 16
   sentences sorted by length, as fairseq-generate batches them) and beam 1 x 1, and at
   beam 5 x 16 in 2 workers of one thread each (the core's ``translate(workers=2)``,
   CTranslate2's ``inter_threads=2, intra_threads=1``, fairseq-generate as two processes
   with ``--distributed-world-size 2``; not onnxruntime, whose search has no workers):
   - the plugin's model: fairseq-generate; the inference core (``Translator``) float32 and
     fconv-quantize's int8; onnxruntime (fconv-export, float32 and --int8);
   - the Transformer: fairseq-generate; CTranslate2 float32 and int8;
3. prints BLEU and chrF (sacreBLEU, detokenised, against the raw references),
   sentences/s, peak memory (the engine's process' peak resident memory, VmHWM, in the
   one-process settings), model size, each
   model's FLOPs per sentence (counted by torch's FlopCounterMode over a beam-5 decode)
   and its share of this machine's measured float32 and int8 matrix-product peaks;
   and the Transformer's BLEU after 3x the updates.

Every engine runs in a process of its own (so that its peak memory is its own), with
2 threads, taking turns with the others; a process times generation only (models are
loaded and warmed up first). Text processing (Moses, BPE) is timed apart. Training
runs once and is reused by later runs (``--retrain`` to train again).

    .venv/bin/pip install -c constraints.txt ctranslate2      # the "bench" extra, pinned
    .venv/bin/python benchmarks/vs_ctranslate2.py examples/bible_es_en/runs/latest
    .venv/bin/python benchmarks/vs_ctranslate2.py RUN --engine "core int8" --setting beam5x16   # one engine
    .venv/bin/python benchmarks/vs_ctranslate2.py --quick   # checks that it runs: a tiny run, a Transformer of
        # 1 + 1 layers 64 wide, peaks of 256^3 products, outputs cut at 6 tokens
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import harness  # noqa: E402
BIN = Path(sys.executable).parent
THREADS = 2
SETTINGS = {"beam5x16": (5, 16, 1), "beam1x1": (1, 1, 1), "beam5x16w2": (5, 16, THREADS)}  # beam, batch, workers
PLUGIN_ENGINES = ("fconv fairseq-generate", "core float32", "core int8", "onnx float32", "onnx int8")
TRANSFORMER_ENGINES = ("transformer fairseq-generate", "ctranslate2 float32", "ctranslate2 int8")
ENGINES = PLUGIN_ENGINES + TRANSFORMER_ENGINES
# engines that decode batches side by side, one thread each (the core's workers, CTranslate2's inter_threads,
# fairseq-generate in shards)
WORKER_ENGINES = ("fconv fairseq-generate", "core float32", "core int8", "transformer fairseq-generate",
                  "ctranslate2 float32", "ctranslate2 int8")


MAX_LEN = 200  # every engine's longest output (fairseq's max_len_b, max_len_a 0); --quick: harness.QUICK_MAX_LEN


def runs_setting(engine: str, setting: str) -> bool:
    return SETTINGS[setting][2] == 1 or engine in WORKER_ENGINES


TRANSFORMER = [
    "--arch", "transformer", "--encoder-layers", "3", "--decoder-layers", "3",
    "--encoder-embed-dim", "256", "--decoder-embed-dim", "256",
    "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--share-decoder-input-output-embed",
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "0.001",
    "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100",
    "--dropout", "0.1", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--max-tokens", "3000", "--required-batch-size-multiple", "1", "--seed", "1",
]
# --quick: the same code at a tiny size (fairseq takes an option's last value)
QUICK_TRANSFORMER = [
    "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
    "--encoder-ffn-embed-dim", "128", "--decoder-ffn-embed-dim", "128",
]


# --- the run's files --------------------------------------------------------------------

def quickstart_updates(run: Path) -> int:
    found = re.findall(r"num_updates (\d+)", (run / "train.log").read_text(encoding="utf-8"))
    if not found:
        sys.exit(f"{run}/train.log has no 'num_updates'; give a finished quickstart run")
    return int(found[-1])


def work_dir(run: Path) -> Path:
    return run / "vs_ctranslate2"


def transformer_checkpoint(run: Path, updates: int) -> Path:
    found = sorted(work_dir(run).glob(f"transformer/checkpoint_*_{updates}.pt"))
    return found[0] if found else work_dir(run) / "transformer" / f"checkpoint_missing_{updates}.pt"


def train_transformer(run: Path, updates: int, more: int, retrain: bool, quick: bool = False) -> float:
    """The Transformer trained to ``updates * more`` updates, a checkpoint every ``updates``."""
    save_dir = work_dir(run) / "transformer"
    if not retrain and transformer_checkpoint(run, updates * more).exists():
        return 0.0
    save_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(save_dir / "train.log", "w", encoding="utf-8") as log:
        subprocess.run([str(BIN / "fairseq-train"), str(run / "data-bin"), "--user-dir", str(ROOT / "fconv_plugin"),
                        *TRANSFORMER, *(QUICK_TRANSFORMER if quick else []), "--max-update", str(updates * more), "--save-interval-updates", str(updates),
                        "--keep-interval-updates", "-1", "--no-epoch-checkpoints", "--disable-validation",
                        "--save-dir", str(save_dir), "--log-format", "simple", "--log-interval", "100"],
                       check=True, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - start


def convert_to_ctranslate2(run: Path, updates: int) -> Path:
    """``ct2-fairseq-converter`` on the Transformer, through the plugin's safe checkpoint loader."""
    out = work_dir(run) / f"ctranslate2_{updates}"
    if (out / "model.bin").exists():
        return out
    from ctranslate2.converters import FairseqConverter

    from fconv_plugin.checkpoint_io import loading_fairseq_checkpoints

    checkpoint = transformer_checkpoint(run, updates)
    with loading_fairseq_checkpoints(str(checkpoint)):
        FairseqConverter(str(checkpoint), str(run / "data-bin"), source_lang="es", target_lang="en").convert(str(out))
    return out


def onnx_directory(run: Path, engine: str) -> Path:
    return work_dir(run) / engine.replace(" ", "_")


def fconv_export(run: Path, out: Path, int8: bool) -> None:
    """The run's checkpoint_best.pt exported by fconv-export into ``out``, with the run's Moses and BPE."""
    subprocess.run([str(BIN / "fconv-export"), str(run / "checkpoints" / "checkpoint_best.pt"), str(run / "data-bin"),
                    str(out), "--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", str(run / "codes"),
                    *(["--int8"] if int8 else [])], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def export_onnx(run: Path) -> None:
    """fconv-export, float32 and --int8, made again by every run (by this version of the exporter)."""
    for name, int8 in (("onnx float32", False), ("onnx int8", True)):
        out = onnx_directory(run, name)
        shutil.rmtree(out, ignore_errors=True)  # this benchmark's own export from an earlier run
        fconv_export(run, out, int8)


def int8_checkpoint(run: Path) -> Path:
    return harness.int8_copy(run)


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- one engine, in its own process ---------------------------------------------------------

def text_tools(run: Path):
    """Moses and BPE as the quickstart applies them (encode) and undoes them (decode)."""
    from sacremoses import MosesDetokenizer, MosesTokenizer
    from subword_nmt.apply_bpe import BPE

    with open(run / "codes", encoding="utf-8") as codes:
        bpe = BPE(codes)
    tokenizer, detokenizer = MosesTokenizer("es"), MosesDetokenizer("en")

    def encode(line):
        return bpe.process_line(tokenizer.tokenize(line, return_str=True, escape=False, aggressive_dash_splits=False))

    def decode(bpe_text):
        return detokenizer.detokenize((bpe_text + " ").replace("@@ ", "").split())

    return encode, decode


def peak_memory(pid="self") -> int:
    """A process' peak resident memory in bytes (VmHWM: since its program started, unlike
    getrusage's maximum, which a child started by fork and exec inherits from its parent)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def fairseq_generate(run: Path, checkpoint: Path, beam: int, batch: int, decode, workers: int = 1) -> dict:
    """fairseq-generate on the test set; with ``workers`` > 1, that many processes of one
    thread side by side, each on its share of the batches (``--distributed-world-size`` and
    ``--distributed-rank``, by which fairseq-generate shards its batches)."""
    command = [str(BIN / "fairseq-generate"), str(run / "data-bin"), "--user-dir", str(ROOT / "fconv_plugin"),
               "--path", str(checkpoint), "--gen-subset", "test", "--beam", str(beam), "--batch-size", str(batch),
               "--required-batch-size-multiple", "1", "-s", "es", "-t", "en", "--max-len-a", "0",
               "--max-len-b", str(MAX_LEN)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1") if workers > 1 else None
    shards = ([[*command, "--distributed-world-size", str(workers), "--distributed-rank", str(i)] for i in range(workers)]
              if workers > 1 else [command])
    with tempfile.TemporaryDirectory() as tmp:
        logs = [(open(Path(tmp) / f"{i}.out", "w+"), open(Path(tmp) / f"{i}.err", "w+")) for i in range(len(shards))]
        processes = [subprocess.Popen(c, stdout=o, stderr=e, text=True, env=env) for c, (o, e) in zip(shards, logs)]
        peak = 0
        while any(p.poll() is None for p in processes):  # their peak, read while they run
            try:
                peak = max(peak, sum(peak_memory(p.pid) for p in processes if p.poll() is None))
            except OSError:
                pass
            time.sleep(0.05)
        hypotheses, sentences, seconds = {}, 0, 0.0
        for process, (stdout, stderr) in zip(processes, logs):
            stdout.seek(0), stderr.seek(0)
            out = subprocess.CompletedProcess(process.args, process.returncode, stdout.read(), stderr.read())
            stdout.close(), stderr.close()
            out.check_returncode()
            for line in out.stdout.splitlines():
                if line.startswith("H-"):
                    index, _, text = line.split("\t", 2)
                    hypotheses[int(index[2:])] = decode(text)
            rate = re.search(r"Translated ([\d,]+) sentences .*\(([\d.]+) sentences/s", out.stdout + out.stderr)
            count = int(rate.group(1).replace(",", ""))
            sentences += count
            seconds = max(seconds, count / float(rate.group(2)))  # side by side: the slower one's time
    assert sentences == len(hypotheses), "the shards' sentences overlap or are missing"
    return {"outputs": [hypotheses[i] for i in range(len(hypotheses))], "seconds": seconds, "peak_bytes": peak}


def run_engine(run: Path, engine: str, setting: str) -> dict:
    """Load, warm up, translate the test verses; outputs, generation seconds, peak memory.

    Only the torch engines import torch: its OpenMP threads would compete with
    onnxruntime's and CTranslate2's own thread pools."""
    beam, batch, workers = SETTINGS[setting]
    encode, decode = text_tools(run)
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()
    if engine.endswith("fairseq-generate"):
        checkpoint = (run / "checkpoints" / "checkpoint_best.pt" if engine.startswith("fconv")
                      else transformer_checkpoint(run, quickstart_updates(run)))
        return fairseq_generate(run, checkpoint, beam, batch, decode, workers)
    start = time.perf_counter()
    encoded = [encode(line) for line in lines]
    text_seconds = time.perf_counter() - start
    if engine.startswith("core"):
        import torch

        from fconv_plugin.inference import Translator

        torch.set_num_threads(THREADS // workers)
        checkpoint = run / "checkpoints" / "checkpoint_best.pt" if engine == "core float32" else int8_checkpoint(run)
        translator = Translator.from_pretrained(checkpoint, run / "data-bin", source_lang="es", target_lang="en",
                                                tokenizer="moses", bpe="subword_nmt", bpe_codes=str(run / "codes"))

        def translate(sources, texts):  # BPE pieces in and out, as CTranslate2's: text processing timed apart
            checked = [translator.checked_sentence(text, encoded=source) for text, source in zip(texts, sources)]
            results = translator.translate(checked, decode=False, beam=beam, max_sentences=batch,
                                           workers=workers, max_len_a=0.0, max_len_b=MAX_LEN)
            return [r.best.text for r in results]
    elif engine.startswith("onnx"):
        import numpy as np

        from fconv_onnx.beam_search import generate
        from fconv_onnx.model import ExportedModel
        from fconv_onnx.translate import pad_left

        model = ExportedModel(str(onnx_directory(run, engine)), threads=THREADS)
        d = model.target_vocabulary

        def translate(sources, texts):
            ids = [model.source_vocabulary.encode(s) for s in sources]
            order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
            found = [None] * len(ids)
            for i in range(0, len(order), batch):
                chunk = order[i: i + batch]
                hypotheses = generate(model, pad_left([ids[j] for j in chunk], model.manifest.symbols.source_pad), beam,
                                      eos=d.eos, pad=d.pad, unk=d.unk, max_len_a=0.0, max_len_b=MAX_LEN,
                                      max_positions=model.max_target_positions)
                for j, h in zip(chunk, hypotheses):
                    found[j] = d.string(np.asarray(h[0].tokens[:-1]))
            return found
    else:
        import ctranslate2

        compute_type = engine.split()[-1]
        model = ctranslate2.Translator(str(convert_to_ctranslate2(run, quickstart_updates(run))), device="cpu",
                                       compute_type=compute_type, intra_threads=THREADS // workers, inter_threads=workers)

        def translate(sources, texts):
            results = model.translate_batch([s.split() for s in sources], max_batch_size=batch, beam_size=beam,
                                            max_decoding_length=MAX_LEN)
            return [" ".join(r.hypotheses[0]) for r in results]

    translate(encoded[:batch * workers], lines[:batch * workers])  # warm-up (every worker)
    start = time.perf_counter()
    outputs = translate(encoded, lines)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    detokenised = [decode(o) for o in outputs]
    text_seconds += time.perf_counter() - start
    return {"outputs": detokenised, "seconds": seconds, "text_seconds": text_seconds,
            "peak_bytes": peak_memory()}


# --- FLOPs and the machine's peak -------------------------------------------------------------

def flops_per_sentence(run: Path, which: str, verses: int = 48) -> float:
    """Matrix-product FLOPs per verse of a float32 beam-5 decode in calls of 16, counted by torch."""
    import torch
    from fairseq import checkpoint_utils
    from fairseq.sequence_generator import SequenceGenerator
    from torch.utils.flop_counter import FlopCounterMode

    from fconv_plugin.checkpoint_io import loading_fairseq_checkpoints

    def conv_tbc_flops(input_shape, weight_shape, bias_shape, pad=0, out_shape=None, **_):
        time_steps, rows, _ = input_shape
        kernel, cin, cout = weight_shape
        return 2 * (time_steps + 2 * pad - kernel + 1) * rows * kernel * cin * cout

    path = run / "checkpoints" / "checkpoint_best.pt" if which == "fconv" else transformer_checkpoint(run, quickstart_updates(run))
    with loading_fairseq_checkpoints(str(path)):
        models, _, task = checkpoint_utils.load_model_ensemble_and_task(
            [str(path)], arg_overrides={"data": str(run / "data-bin")})
    model = models[0].eval()
    encode, _ = text_tools(run)
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()[:verses]
    sources = [task.source_dictionary.encode_line(encode(line), add_if_not_exist=False).long() for line in lines]
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=5, max_len_a=0, max_len_b=MAX_LEN)
    counter = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.conv_tbc: conv_tbc_flops})
    with counter, torch.no_grad():
        for i in range(0, len(sources), 16):
            chunk = sources[i: i + 16]
            src = torch.full((len(chunk), max(len(s) for s in chunk)), task.source_dictionary.pad())
            for row, s in enumerate(chunk):
                src[row, -len(s):] = s
            generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([len(s) for s in chunk])}})
    return counter.get_total_flops() / len(sources)


def machine_peaks(size: int = 1024) -> tuple:
    """This machine's float32 GFLOP/s and int8 GOP/s for size^3 products with 2 threads."""
    import torch

    torch.set_num_threads(THREADS)
    a, b = torch.randn(size, size), torch.randn(size, size)
    qa, qb = torch.randint(-127, 127, (size, size), dtype=torch.int8), torch.randint(-127, 127, (size, size), dtype=torch.int8)
    peaks = []
    for product in (lambda: torch.mm(a, b), lambda: torch._int_mm(qa, qb)):
        product()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(5):
                product()
            times.append((time.perf_counter() - start) / 5)
        peaks.append(2 * size ** 3 / min(times) / 1e9)
    return tuple(peaks)


# --- the report -----------------------------------------------------------------------------------

def scores(outputs, references):
    import sacrebleu

    return (sacrebleu.corpus_bleu(outputs, [references]).score, sacrebleu.corpus_chrf(outputs, [references]).score)


def child(run: Path, args: list) -> dict:
    out = subprocess.run([sys.executable, __file__, str(run), "--max-len", str(MAX_LEN), *args], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    global MAX_LEN
    parser = harness.arguments(__doc__)
    parser.set_defaults(repeats=1)
    parser.add_argument("--more", type=int, default=3, help="the Transformer's longer budget, x the quickstart's updates")
    parser.add_argument("--max-len", type=int, default=MAX_LEN, help=argparse.SUPPRESS)
    parser.add_argument("--retrain", action="store_true", help="train the Transformer again")
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)  # one engine, in a process of its own
    parser.add_argument("--setting", choices=list(SETTINGS), help=argparse.SUPPRESS)
    parser.add_argument("--flops", choices=("fconv", "transformer"), help=argparse.SUPPRESS)
    parser.add_argument("--bleu-of", type=int, help=argparse.SUPPRESS)
    args = harness.parse(parser, argv)
    MAX_LEN = harness.QUICK_MAX_LEN if args.quick else args.max_len
    run = args.run
    if args.engine:
        print(json.dumps(run_engine(run, args.engine, args.setting)))
        return
    if args.flops:
        print(json.dumps({"flops": flops_per_sentence(run, args.flops)}))
        return
    if args.bleu_of:
        _, decode = text_tools(run)
        result = fairseq_generate(run, transformer_checkpoint(run, args.bleu_of), 5, 16, decode)
        print(json.dumps(result))
        return

    updates = quickstart_updates(run)
    trained = train_transformer(run, updates, args.more, args.retrain, args.quick)
    convert_to_ctranslate2(run, updates)
    export_onnx(run)
    int8_checkpoint(run)
    references = (run / "test.raw.en").read_text(encoding="utf-8").splitlines()
    import ctranslate2
    import onnxruntime
    import torch

    print(f"{harness.machine()}; {THREADS} threads; torch {torch.__version__}, "
          f"ctranslate2 {ctranslate2.__version__}, onnxruntime {onnxruntime.__version__}; {len(references)} test verses; "
          f"both models trained {updates} updates, --max-tokens 3000"
          + (f" (Transformer trained now in {trained:.0f} s to {updates * args.more} updates)" if trained else ""))

    # --quick leaves out beam 1 x 1: the same code as beam 5 x 16 with other numbers
    settings = [s for s in SETTINGS if not (args.quick and s == "beam1x1")]
    results = {(engine, setting): [] for engine in ENGINES for setting in settings if runs_setting(engine, setting)}
    for repetition in range(args.repeats):
        for setting in settings:
            order = ENGINES if repetition % 2 == 0 else tuple(reversed(ENGINES))
            for engine in (e for e in order if runs_setting(e, setting)):
                results[(engine, setting)].append(child(run, ["--engine", engine, "--setting", setting]))
    peak_size = harness.QUICK_PEAK_SIZE if args.quick else 1024
    gflops, gops = machine_peaks(peak_size)
    flops = {"fconv": child(run, ["--flops", "fconv"])["flops"], "transformer": child(run, ["--flops", "transformer"])["flops"]}
    sizes = {
        "fconv fairseq-generate": size_of(run / "checkpoints" / "checkpoint_best.pt"),
        "core float32": size_of(run / "checkpoints" / "checkpoint_best.pt"),
        "core int8": size_of(int8_checkpoint(run)),
        "onnx float32": size_of(onnx_directory(run, "onnx float32")),
        "onnx int8": size_of(onnx_directory(run, "onnx int8")),
        "transformer fairseq-generate": size_of(transformer_checkpoint(run, updates)),
        "ctranslate2 float32": size_of(work_dir(run) / f"ctranslate2_{updates}"),
        "ctranslate2 int8": size_of(work_dir(run) / f"ctranslate2_{updates}"),
    }
    print(f"machine peak ({peak_size}^3 products): float32 {gflops:.0f} GFLOP/s, int8 {gops:.0f} GOP/s")
    print(f"{'engine':<29} {'BLEU':>5} {'chrF':>5} | {'beam 5 x 16':>11} {'beam 1 x 1':>10} {f'{THREADS} workers':>9} "
          f"sentences/s | {'peak MB':>7} {'size MB':>7} | GFLOP/sent  % of peak (beam 5 x 16)")
    table = {}
    for engine in ENGINES:
        rates = {s: len(references) / statistics.median(r["seconds"] for r in results[(engine, s)])
                 for s in settings if runs_setting(engine, s)}
        bleu, chrf = scores(results[(engine, "beam5x16")][0]["outputs"], references)
        if "beam5x16w2" in rates and results[(engine, "beam5x16w2")][0]["outputs"] != results[(engine, "beam5x16")][0]["outputs"]:
            print(f"{engine}: {THREADS} workers translated differently from one process")
        # one process' peak: a worker process' own memory (the core's) is not in it
        peak = max(r["peak_bytes"] for s in settings if SETTINGS[s][2] == 1 for r in results[(engine, s)]) / 2 ** 20
        model_flops = flops["fconv" if engine in PLUGIN_ENGINES else "transformer"]
        limit = gops if "int8" in engine else gflops
        share = 100 * model_flops * rates["beam5x16"] / (limit * 1e9)
        table[engine] = dict(bleu=bleu, chrf=chrf, rates=rates, peak_mb=peak, size_mb=sizes[engine] / 2 ** 20, share=share)
        workers = f"{rates['beam5x16w2']:>9.1f}" if "beam5x16w2" in rates else f"{'-':>9}"
        greedy = f"{rates['beam1x1']:>10.1f}" if "beam1x1" in rates else f"{'-':>10}"
        print(f"{engine:<29} {bleu:>5.2f} {chrf:>5.1f} | {rates['beam5x16']:>11.1f} {greedy} {workers} "
              f"            | "
              f"{peak:>7.0f} {sizes[engine] / 2 ** 20:>7.1f} | {model_flops / 1e9:>10.2f}  {share:>5.1f}%")
    text = [r["text_seconds"] for (e, s), rs in results.items() if e.startswith("core") and s == "beam5x16" for r in rs]
    print(f"text processing (Moses + BPE in and out, {len(references)} verses): {statistics.median(text):.2f} s, outside the rates above")
    f32, generate = table["core float32"]["rates"]["beam5x16"], table["fconv fairseq-generate"]["rates"]["beam5x16"]
    i8, ct2 = table["core int8"]["rates"]["beam5x16"], table["ctranslate2 int8"]["rates"]["beam5x16"]
    print(f"at beam 5 x 16, one process of {THREADS} threads: core float32 / fairseq-generate {f32 / generate:.2f}x "
          f"(goal 1.6), core int8 / core float32 {i8 / f32:.2f}x (goal 1.5), best core / CTranslate2 int8 "
          f"{max(f32, i8) / ct2:.2f}x (goal 2)")
    w_f32, w_i8, w_ct2, w_generate = (table[e]["rates"]["beam5x16w2"] for e in (
        "core float32", "core int8", "ctranslate2 int8", "fconv fairseq-generate"))
    print(f"at beam 5 x 16 in {THREADS} workers of one thread each: core float32 / fairseq-generate ({THREADS} shards) "
          f"{w_f32 / w_generate:.2f}x, core int8 / core float32 {w_i8 / w_f32:.2f}x, best core / CTranslate2 int8 "
          f"(inter_threads {THREADS}) {max(w_f32, w_i8) / w_ct2:.2f}x; core float32 in workers / fairseq-generate as "
          f"run above (one process) {w_f32 / generate:.2f}x; core float32 in workers at "
          f"{100 * flops['fconv'] * w_f32 / (gflops * 1e9):.0f}% of the float32 peak")
    fastest = {e: max(table[e]["rates"][s] for s in ("beam5x16", "beam5x16w2") if s in table[e]["rates"])
               for e in ("core float32", "core int8", "ctranslate2 int8")}
    print(f"each engine in its fastest beam 5 x 16 setting: best core {max(fastest['core float32'], fastest['core int8']):.1f}"
          f" / CTranslate2 int8 {fastest['ctranslate2 int8']:.1f} = "
          f"{max(fastest['core float32'], fastest['core int8']) / fastest['ctranslate2 int8']:.2f}x (goal 2)")
    longer = updates * args.more
    bleu_longer = scores(child(run, ["--bleu-of", str(longer)])["outputs"], references)
    print(f"the Transformer after {longer} updates (fairseq-generate, beam 5): BLEU {bleu_longer[0]:.2f}, chrF {bleu_longer[1]:.1f} "
          f"(after {updates}: {table['transformer fairseq-generate']['bleu']:.2f}); ConvS2S after {updates}: "
          f"{table['core float32']['bleu']:.2f}")


if __name__ == "__main__":
    main()
