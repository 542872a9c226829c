"""ConvS2S on a GPU: the quickstart's model decoded in float32, float16 and bfloat16, and its
training in float32 against ``--fp16`` and ``--bf16``, side by side in one run.

1. ``decode``: the run's test verses, tokenised and BPE-encoded once, translated at beam 5 x 16,
   beam 5 x 128 and beam 1 x 1 (calls of that many sentences, sorted by length as fairseq
   batches them) by
   - fairseq's own fconv (``fairseq.models.fconv``, the reference) with the checkpoint's
     weights, through fairseq's SequenceGenerator (what fairseq-generate runs);
   - the plugin's model through fairseq's SequenceGenerator;
   - the plugin's model through the inference core's search (``decoding/search.py``);
   each in float32, float16 and bfloat16, all on the same batches. Reported: sentences/s,
   sacreBLEU and chrF against the raw references, peak GPU memory, and how many verses get
   the same best hypothesis as fairseq's fconv in float32 and in the same precision.
2. ``train``: the quickstart's ``fairseq-train`` (its adam recipe, the same updates, batch
   and seed) in float32, ``--fp16`` and ``--bf16``; the training loss every 10 updates and
   the validation loss every quarter, drawn in one picture; and each model's test BLEU
   (the core's search, beam 5 x 128, in the precision it was trained in).

Everything runs in this one process (training in fairseq-train subprocesses, one after
another). A GPU machine is set up as any other (``TORCH_VARIANT=cu126 bash
scripts/setup_env.sh``); ``pack`` copies a run without its optimiser state (a third of the
size) for carrying to one.

    python benchmarks/gpu.py measure examples/bible_es_en/runs/latest OUT_DIR
    python benchmarks/gpu.py pack examples/bible_es_en/runs/latest SMALL_RUN_DIR
    python benchmarks/gpu.py --quick      # a few verses, outputs cut at 6 tokens, no training, on a GPU if there is one: checks that it runs
"""

import copy
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import harness  # noqa: E402
from vs_ctranslate2 import quickstart_updates, scores, text_tools  # noqa: E402  the run's files, Moses and BPE, sacreBLEU

PRECISIONS = ("float32", "float16", "bfloat16")
ENGINES = ("fairseq fconv", "plugin, fairseq's generator", "plugin, core")
SETTINGS = {"beam5x16": (5, 16), "beam5x128": (5, 128), "beam1x1": (1, 1)}
# fairseq-train's precisions: (its flags, the precision the trained model is decoded in).
# fairseq 0.12's --bf16 means a TPU (it sets --tpu), so bfloat16 is measured for decoding only.
TRAINING = {"float32": ([], "float32"), "--fp16": (["--fp16"], "float16"), "--amp": (["--amp"], "float32")}
# quickstart.sh's adam recipe (RECIPE=adam, the default), written out for UPDATES updates
QUICKSTART_RECIPE = [
    "--arch", "fconv_iwslt_de_en", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.1",
    "--lr", "0.003", "--lr-scheduler", "polynomial_decay", "--end-learning-rate", "0", "--dropout", "0.1",
    "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--max-tokens", "3000", "--required-batch-size-multiple", "1",
]


# --- the run's files ------------------------------------------------------------------------------

def pack(run: Path, dest: Path) -> None:
    """The files ``measure`` reads, with checkpoint_best.pt's model and options only."""
    import torch

    from fconv_plugin.checkpoint_io import read_checkpoint_file

    if dest.exists():
        sys.exit(f"gpu.py: {dest} exists; give a new directory (nothing was changed)")
    (dest / "checkpoints").mkdir(parents=True)
    shutil.copytree(run / "data-bin", dest / "data-bin")
    for name in ("codes", "train.log", "test.raw.es", "test.raw.en"):
        shutil.copy(run / name, dest / name)
    state = read_checkpoint_file(str(run / "checkpoints" / "checkpoint_best.pt"))  # torch's safe loading
    state["last_optimizer_state"] = None
    torch.save(state, dest / "checkpoints" / "checkpoint_best.pt")


def load(run: Path, checkpoint: Path):
    """(the plugin's model, fairseq's fconv with the same weights, the task), float32 on the CPU."""
    from fairseq import checkpoint_utils
    from fairseq.models import fconv as reference_fconv

    from fconv_plugin.checkpoint_io import loading_fairseq_checkpoints

    with loading_fairseq_checkpoints(str(checkpoint)):
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            [str(checkpoint)], arg_overrides={"data": str(run / "data-bin")})
    reference = reference_fconv.FConvModel.build_model(cfg.model, task)
    reference.load_state_dict(models[0].state_dict())
    for model in (models[0], reference):  # weight norm folded in, as for generation (and deepcopy)
        model.eval().make_generation_fast_(need_attn=False)
    return models[0], reference, task


def encoded_sources(run: Path, task):
    encode, decode = text_tools(run)
    lines = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()
    references = (run / "test.raw.en").read_text(encoding="utf-8").splitlines()
    sources = [task.source_dictionary.encode_line(encode(line), add_if_not_exist=False).long() for line in lines]
    return sources, references, decode


def batches(sources, size: int, pad: int, device):
    """(verse indices, src_tokens, src_lengths): calls of ``size`` verses sorted by length, left-padded."""
    import torch

    order = sorted(range(len(sources)), key=lambda i: (len(sources[i]), i))
    for start in range(0, len(order), size):
        ids = order[start: start + size]
        longest = max(len(sources[i]) for i in ids)
        src = torch.full((len(ids), longest), pad, dtype=torch.long)
        for row, i in enumerate(ids):
            src[row, longest - len(sources[i]):] = sources[i]
        lengths = torch.tensor([len(sources[i]) for i in ids])
        yield ids, src.to(device), lengths.to(device)


# --- decoding -------------------------------------------------------------------------------------

def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def on_device(model, precision: str, beam: int, device: str):
    import torch

    model = copy.deepcopy(model).to(device=device, dtype=getattr(torch, precision))
    model.make_generation_fast_(beamable_mm_beam_size=beam, need_attn=False)
    return model


MAX_LEN = 200  # every engine's longest output (max_len_b; fairseq's default); --quick: harness.QUICK_MAX_LEN


def searcher(engine: str, model, tgt_dict, beam: int):
    from fairseq.sequence_generator import SequenceGenerator

    from fconv_plugin.decoding.search import BeamSearch

    if engine == "plugin, core":
        search = BeamSearch(model, tgt_dict, beam_size=beam, max_len_b=MAX_LEN)
        return lambda src, lengths: search.generate(src, lengths)
    generator = SequenceGenerator([model], tgt_dict, beam_size=beam, max_len_b=MAX_LEN)
    return lambda src, lengths: generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})


def decode_with(engine: str, model, task, sources, size: int, beam: int, device: str) -> dict:
    """The best hypothesis' tokens for every verse, generation seconds and peak GPU bytes."""
    import torch

    search = searcher(engine, model, task.target_dictionary, beam)
    pad = task.source_dictionary.pad()
    calls = list(batches(sources, size, pad, device))
    with torch.no_grad():
        search(*calls[len(calls) // 2][1:])  # warm-up on a middling call
        synchronize(device)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        best = [None] * len(sources)
        start = time.perf_counter()
        for ids, src, lengths in calls:
            for i, hypos in zip(ids, search(src, lengths)):
                best[i] = hypos[0]["tokens"]
        synchronize(device)
        seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else 0
    return {"tokens": [t.tolist() for t in best], "seconds": seconds, "peak_bytes": peak}


def measure_decoding(run: Path, verses: int, greedy_verses: int, device: str) -> list:
    plugin, reference, task = load(run, run / "checkpoints" / "checkpoint_best.pt")
    sources, references, decode = encoded_sources(run, task)
    rows = []
    for setting, (beam, size) in SETTINGS.items():
        count = min(greedy_verses if setting == "beam1x1" else verses, len(sources))
        found = {}
        for precision in PRECISIONS:
            models = {"fairseq fconv": on_device(reference, precision, beam, device)}
            models["plugin, fairseq's generator"] = models["plugin, core"] = on_device(plugin, precision, beam, device)
            for engine in ENGINES:
                try:
                    result = decode_with(engine, models[engine], task, sources[:count], size, beam, device)
                except Exception as error:  # one engine's failure is a row of the report, not the end of the run
                    result = {"tokens": [[]] * count, "seconds": float("inf"), "peak_bytes": 0,
                              "failed": f"{type(error).__name__}: {error}"[:300]}
                found[engine, precision] = result["tokens"]
                texts = [decode(task.target_dictionary.string(tokens)) for tokens in result["tokens"]]
                bleu, chrf = scores(texts, references[:count])
                row = {"setting": setting, "verses": count, "engine": engine, "precision": precision,
                       "sentences_per_s": count / result["seconds"], "bleu": bleu, "chrf": chrf,
                       "peak_gpu_mib": result["peak_bytes"] / 2 ** 20, "failed": result.get("failed")}
                rows.append(row)
                print(json.dumps(row), flush=True)
            del models
        for row in rows[-len(ENGINES) * len(PRECISIONS):]:
            mine = found[row["engine"], row["precision"]]
            row["same_as_fconv_float32"] = sum(a == b for a, b in zip(mine, found["fairseq fconv", "float32"]))
            row["same_as_fconv_same_precision"] = sum(a == b for a, b in zip(mine, found["fairseq fconv", row["precision"]]))
    return rows


def matrix_peaks(device: str, size: int = 8192) -> dict:
    """This GPU's TFLOP/s for size^3 matrix products in each precision (the mean of 10 after 3)."""
    import torch

    peaks = {}
    for precision in PRECISIONS:
        a = torch.randn(size, size, device=device, dtype=getattr(torch, precision))
        b = torch.randn(size, size, device=device, dtype=getattr(torch, precision))
        for _ in range(3):
            a @ b
        synchronize(device)
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        synchronize(device)
        peaks[precision] = 2 * size ** 3 * 10 / (time.perf_counter() - start) / 1e12
    return peaks


# --- training -------------------------------------------------------------------------------------

def train(run: Path, out: Path, checkpoints: Path, precision: str, updates: int, device: str) -> dict:
    """fairseq-train as the quickstart runs it, in ``precision`` (a key of TRAINING); its logged losses."""
    save_dir = checkpoints / precision.strip("-")
    command = [sys.executable, "-m", "fairseq_cli.train", str(run / "data-bin"), "--user-dir", str(ROOT / "fconv_plugin"),
               *QUICKSTART_RECIPE, *TRAINING[precision][0], "--seed", "1", "--max-update", str(updates),
               "--warmup-updates", str(updates // 6), "--total-num-update", str(updates),
               "--validate-interval-updates", str((updates + 3) // 4), "--validate-interval", "1000",
               "--save-interval-updates", str(updates), "--no-epoch-checkpoints", "--save-dir", str(save_dir),
               "--log-format", "json", "--log-interval", "10", *(["--cpu"] if device == "cpu" else [])]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    (out / f"train-{precision.strip('-')}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        return {"precision": precision, "failed": (done.stdout + done.stderr).strip().splitlines()[-1:]}
    train_loss, valid_loss = [], []
    for line in (done.stdout + done.stderr).splitlines():
        kind = re.search(r"\| (train_inner|valid) \| (\{.*\})\s*$", line)
        if kind:
            fields = json.loads(kind.group(2))
            if kind.group(1) == "train_inner":
                train_loss.append((int(fields["num_updates"]), float(fields["loss"])))
            else:
                valid_loss.append((int(fields["valid_num_updates"]), float(fields["valid_loss"])))
    return {"precision": precision, "seconds": seconds, "train_loss": train_loss, "valid_loss": valid_loss,
            "checkpoint": str(save_dir / "checkpoint_last.pt")}


def trained_bleu(run: Path, checkpoint: Path, precision: str, device: str) -> float:
    plugin, _, task = load(run, checkpoint)
    sources, references, decode = encoded_sources(run, task)
    result = decode_with("plugin, core", on_device(plugin, precision, 5, device), task, sources, 128, 5, device)
    return scores([decode(task.target_dictionary.string(t)) for t in result["tokens"]], references)[0]


def plot_training(runs: list, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 4), dpi=110)
    for run, colour in zip(runs, ("tab:blue", "tab:orange", "tab:green")):
        if "failed" in run:
            continue
        axis.plot(*zip(*run["train_loss"]), "-", color=colour, lw=1, label=f"{run['precision']}: training loss")
        axis.plot(*zip(*run["valid_loss"]), "o--", color=colour, label=f"{run['precision']}: validation loss")
    axis.set_xlabel("updates")
    axis.set_ylabel("loss (base 2)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    axis.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)


# --- the report -----------------------------------------------------------------------------------

def print_tables(decoding: list, training: list, peaks: dict) -> None:
    print("\n| setting | engine | precision | sentences/s | BLEU | chrF | peak GPU MiB | same best as fconv float32 | as fconv, same precision |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in decoding:
        if r["failed"]:
            print(f"| {r['setting']} ({r['verses']}) | {r['engine']} | {r['precision']} | failed: {r['failed']} | | | | | |")
            continue
        print(f"| {r['setting']} ({r['verses']}) | {r['engine']} | {r['precision']} | {r['sentences_per_s']:.1f} | "
              f"{r['bleu']:.2f} | {r['chrf']:.2f} | {r['peak_gpu_mib']:.0f} | {r['same_as_fconv_float32']}/{r['verses']} | "
              f"{r['same_as_fconv_same_precision']}/{r['verses']} |")
    by = {(r["setting"], r["engine"], r["precision"]): r["sentences_per_s"] for r in decoding}
    print("\nratios, sentences/s:")
    for setting in SETTINGS:
        base = by[setting, "fairseq fconv", "float32"] or float("nan")
        print(f"  {setting}: " + ", ".join(f"{engine} {precision} {by[setting, engine, precision] / base:.2f}x"
                                          for engine in ENGINES[1:] for precision in PRECISIONS))
    print("\nmatrix-product peaks, TFLOP/s: " + ", ".join(f"{p} {v:.0f}" for p, v in peaks.items()))
    print("\n| training | seconds | final training loss | final validation loss | test BLEU |")
    print("| --- | --- | --- | --- | --- |")
    for t in training:
        if "failed" in t:
            print(f"| {t['precision']} | failed: {' '.join(t['failed'])} | | | |")
            continue
        print(f"| {t['precision']} | {t['seconds']:.0f} | {t['train_loss'][-1][1]:.3f} | {t['valid_loss'][-1][1]:.3f} | "
              f"{t['bleu']:.2f} |")
    reference = next((t for t in training if t["precision"] == "float32" and "failed" not in t), None)
    for t in training:
        if reference is None or "failed" in t or t is reference:
            continue
        points = dict(reference["train_loss"])
        gaps = [abs(loss - points[u]) for u, loss in t["train_loss"] if u in points]
        print(f"{t['precision']} training loss against float32's, every 10 updates: largest gap {max(gaps):.3f}, "
              f"mean {sum(gaps) / len(gaps):.3f}")


def measure(run: Path, out: Path, verses: int, greedy_verses: int, updates: int, device: str) -> None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu.py: no GPU is visible to torch (torch.cuda.is_available() is False); run it on a GPU machine")
    out.mkdir(parents=True, exist_ok=True)
    if out.exists() and any(out.iterdir()):
        sys.exit(f"gpu.py: {out} is not empty; give a new directory (nothing was changed)")
    machine = {"gpu": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "CPU",
               "torch": torch.__version__, "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}
    print(json.dumps(machine), flush=True)
    report = {"machine": machine, "peaks": matrix_peaks(device, 8192 if device == "cuda" else 512), "decoding": [],
              "training": []}

    def save():  # after every part, so that a run cut short keeps what it measured
        (out / "gpu.json").write_text(json.dumps(report, indent=1), encoding="utf-8")

    report["decoding"] = decoding = measure_decoding(run, verses, greedy_verses, device)
    save()
    training = report["training"]
    updates = quickstart_updates(run) if updates is None else updates
    with tempfile.TemporaryDirectory() as checkpoints:
        for precision in TRAINING if updates > 0 else ():
            result = train(run, out, Path(checkpoints), precision, updates, device)
            if "failed" not in result:
                result["bleu"] = trained_bleu(run, Path(result["checkpoint"]), TRAINING[precision][1], device)
            training.append(result)
            save()
            print(json.dumps({k: v for k, v in result.items() if k not in ("train_loss", "valid_loss")}), flush=True)
    if training:
        plot_training(training, out / "gpu-training.png",
                      f"fconv_iwslt_de_en, Bible es-en, {updates} updates, adam, on {machine['gpu']}")
    peaks = report["peaks"]
    print_tables(decoding, training, peaks)


def main(argv=None):
    parser = harness.arguments(__doc__, run=False)
    sub = parser.add_subparsers(dest="command")
    m = sub.add_parser("measure", help="decode and train on this machine's GPU")
    m.add_argument("run", type=Path, help="a quickstart run directory (or one made by pack)")
    m.add_argument("out", type=Path, help="where the table (gpu.json), logs and gpu-training.png go")
    m.add_argument("--verses", type=int, default=500, help="test verses at beam 5")
    m.add_argument("--greedy-verses", type=int, default=125, help="test verses at beam 1 x 1 (one call each)")
    m.add_argument("--updates", type=int, help="training updates (default: the run's; 0: no training)")
    m.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a rehearsal of the script, slowly")
    p = sub.add_parser("pack", help="copy a run's files for measure, without the optimiser state")
    p.add_argument("run", type=Path)
    p.add_argument("dest", type=Path)
    args = harness.parse(parser, argv)
    if args.quick:
        import torch

        global MAX_LEN
        MAX_LEN = harness.QUICK_MAX_LEN  # 200 steps of float16 emulated on a CPU take minutes

        with tempfile.TemporaryDirectory() as out:
            device = "cuda" if torch.cuda.is_available() else "cpu"
            # 2 verses at beam 5 and 1 greedy: every precision's code; on a CPU float16 and bfloat16 are emulated, slowly
            measure(harness.quick_run(), Path(out), 2, 1, 0, device)
        return
    if args.command is None:
        parser.error("give a command (measure or pack), or --quick")
    if args.command == "pack":
        pack(args.run, args.dest)
    else:
        measure(args.run, args.out, args.verses, args.greedy_verses, args.updates, args.device)


if __name__ == "__main__":
    main()
