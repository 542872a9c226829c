"""What each compiled loop buys: the inference core end to end with each loop switched off
in turn, against all of them, float32 and int8, side by side in one run.

The compiled code is grouped by job (``fconv_plugin/native/``, ``fconv-info``); a group
earns its place only where the core without it (the group's torch form: torch's own
operations) is at least 10% slower end to end. Each setting runs in a process of its own
(``FCONV_NATIVE`` picks the loops; the loader reads it once), all kept running and taking
turns: the run's first ``--sentences`` test verses translated at beam 5 in calls of 16,
as fairseq-generate batches them (sorted by length), and the hypotheses compared with those
of the setting with every loop.

    .venv/bin/python benchmarks/native_loops.py examples/bible_es_en/runs/latest
    .venv/bin/python benchmarks/native_loops.py --quick     # a tiny run: checks that it runs
    .venv/bin/python benchmarks/native_loops.py --against ../before   # every loop: this checkout against another

``--against CHECKOUT`` measures, instead, every loop on in this checkout and in another
one of the plugin (its package first on PYTHONPATH, its loops built in place: ``python
setup.py build_ext --inplace``): a change's before and after, side by side.

Reported per model form: sentences/s (median of ``--repeats``), its spread, the ratio to
every loop on, and how many best hypotheses differ from that setting's.
"""

import argparse
import hashlib
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

# FCONV_NATIVE per setting: every loop, each one off in turn, none
LOOPS = ("int8_rows", "decoder_step", "beam_candidates")
SETTINGS = {"every loop": "1", **{f"without {name}": ",".join(n for n in LOOPS if n != name) for name in LOOPS},
            "torch forms only": "0", "fairseq's SequenceGenerator": "1"}
# the reference search: fairseq's generator over the same model (Translator(search="fairseq"))
FAIRSEQ_SEARCH = "fairseq's SequenceGenerator"
FORMS = ("float32", "int8")


def child(run: Path, form: str, search: str, sentences: int, call: int, threads: int,
          max_len_b: Optional[int] = None) -> None:
    """One setting's process: load, warm up, then time one pass per line of stdin (outputs of at
    most ``max_len_b`` tokens where given; else the translator's own bound)."""
    import torch

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(threads)
    checkpoint = run / "checkpoints" / "checkpoint_best.pt" if form == "float32" else harness.int8_copy(run)
    translator = harness.translator(run, checkpoint, search=search)
    lines = harness.test_lines(run, sentences)
    checked = [translator.checked_sentence(line) for line in lines]  # encoded once, outside the timing
    order = sorted(range(len(lines)), key=lambda i: checked[i].tokens)  # as fairseq batches
    calls = [order[i:i + call] for i in range(0, len(order), call)]
    bound = {} if max_len_b is None else {"max_len_a": 0.0, "max_len_b": max_len_b}
    translator.translate([checked[i] for i in calls[0]], **bound)  # warm-up

    def measure() -> dict:
        outputs = [None] * len(lines)
        start = time.perf_counter()
        for ids in calls:
            for i, result in zip(ids, translator.translate([checked[i] for i in ids], **bound)):
                outputs[i] = result
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "texts": [result.hypotheses[0].text for result in outputs]}

    import fconv_plugin

    harness.serve_measurements({"loops": os.environ.get("FCONV_NATIVE", "1"), "package": fconv_plugin.__file__},
                               measure)


def main(argv=None):
    parser = harness.arguments(__doc__)
    parser.add_argument("--sentences", type=int, default=256, help="test verses translated per measurement")
    parser.add_argument("--call", type=int, default=16, help="sentences a call (beam 5 x 16 by default)")
    parser.add_argument("--forms", default=",".join(FORMS), help="model forms: float32, int8 (comma list)")
    parser.add_argument("--against", type=Path, help="another checkout of the plugin to compare with, every loop on")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--search", default="vectorised", help=argparse.SUPPRESS)
    parser.add_argument("--max-len-b", type=int, help=argparse.SUPPRESS)
    args = harness.parse(parser, argv)
    if args.quick:  # every child, every loop setting, on a handful of sentences of at most 10 tokens (a quick
        # run's model, 8 updates old, writes to the length bound): it runs, its figures mean nothing
        args.sentences, args.max_len_b = min(args.sentences, 8), 10
    if args.child:
        return child(args.run, args.child, args.search, args.sentences, args.call, args.threads, args.max_len_b)
    forms = args.forms.split(",")
    if "int8" in forms:  # made once, here: the children start side by side
        harness.int8_copy(args.run)
    if args.against:
        return against(args, forms)
    children = {}
    bound = child_bound(args)
    for form in forms:
        for setting, loops in SETTINGS.items():
            if form == "float32" and setting == "without int8_rows":
                continue  # float32 models use none of the int8 loops
            command = [__file__, str(args.run), "--child", form, "--sentences", str(args.sentences),
                       "--call", str(args.call), "--threads", str(args.threads),
                       "--search", "fairseq" if setting == FAIRSEQ_SEARCH else "vectorised", *bound]
            children[form, setting] = harness.Child(command, env={"FCONV_NATIVE": loops})
    seconds, answers = harness.take_turns_in_children(children, args.repeats)
    texts = {key: answer["texts"] for key, answer in answers.items()}
    print(f"{args.sentences} test verses of {args.run.name}, beam 5, calls of {args.call}, {args.repeats} turns; "
          f"{harness.machine()}")
    rows = []
    for form in forms:
        base = harness.median(seconds[form, "every loop"])
        for (f, setting), values in seconds.items():
            if f != form:
                continue
            differ = sum(a != b for a, b in zip(texts[f, setting], texts[form, "every loop"]))
            rows.append([form, setting, "" if setting == FAIRSEQ_SEARCH else f"FCONV_NATIVE={SETTINGS[setting]}", f"{args.sentences / harness.median(values):.1f}",
                         f"{harness.spread(values):.1%}", f"{harness.median(values) / base:.2f}",
                         f"{differ} of {args.sentences}"])
    print(harness.table(["form", "setting", "loops", "sentences/s", "spread", "time vs every loop",
                         "outputs that differ"], rows))
    digest = hashlib.sha256(json.dumps(sorted(texts.items())).encode()).hexdigest()[:12]
    print(f"outputs digest {digest}")


def child_bound(args) -> list:
    """A child's --max-len-b, where one is set."""
    return [] if args.max_len_b is None else ["--max-len-b", str(args.max_len_b)]


def against(args, forms) -> None:
    """Every loop on, this checkout against ``args.against``, taking turns."""
    import fconv_plugin

    other = args.against.resolve()
    if not (other / "fconv_plugin" / "__init__.py").exists():
        raise SystemExit(f"{other} is not a checkout of the plugin (no fconv_plugin/__init__.py)")
    checkouts = {"this checkout": Path(fconv_plugin.__file__).resolve().parents[1], other.name: other}
    children = {}
    for form in forms:
        for name, checkout in checkouts.items():
            command = [__file__, str(args.run), "--child", form, "--sentences", str(args.sentences),
                       "--call", str(args.call), "--threads", str(args.threads), *child_bound(args)]
            env = {"FCONV_NATIVE": "1", "PYTHONPATH": str(checkout)}
            children[form, name] = harness.Child(command, env=env)
    for (form, name), child in children.items():
        package = Path(child.ready["package"]).resolve()
        if not package.is_relative_to(checkouts[name]):
            raise SystemExit(f"the {name} child loaded {package}, not the checkout's package")
    seconds, answers = harness.take_turns_in_children(children, args.repeats)
    texts = {key: answer["texts"] for key, answer in answers.items()}
    print(f"{args.sentences} test verses of {args.run.name}, beam 5, calls of {args.call}, {args.repeats} turns, "
          f"every loop on; {harness.machine()}")
    rows = []
    for form in forms:
        base = harness.median(seconds[form, "this checkout"])
        for name, checkout in checkouts.items():
            values = seconds[form, name]
            differ = sum(a != b for a, b in zip(texts[form, name], texts[form, "this checkout"]))
            rows.append([form, f"{name} ({checkout})", f"{args.sentences / harness.median(values):.1f}",
                         f"{harness.spread(values):.1%}", f"{harness.median(values) / base:.2f}",
                         f"{differ} of {args.sentences}"])
    print(harness.table(["form", "checkout", "sentences/s", "spread", "time vs this checkout",
                         "outputs that differ"], rows))


if __name__ == "__main__":
    main()
