"""train.sh's recipe: the model, BPE merges, batch and dropout, from the corpus and the updates the time buys.

train.sh asks this script twice and prints its choices in one block before training:

    python recipe.py corpus WORK_DIR SRC TGT [--merges N]        # after tokenising: BPE merges
    python recipe.py model WORK_DIR SRC TGT (--minutes M --probe PROBE.tsv [--pauses P] | --updates U)
            [--model NAME] [--max-tokens N] [--dropout X] [--lr X]  # after BPE: model, batch, dropout, lr

Each stage reads WORK_DIR's training text, writes its choices (with the statistics behind
them) into WORK_DIR/recipe.json and prints ``name=value`` lines for the shell; a value
given on the command line (a knob the user set) is kept and marked as given. ``--probe``
is speed_probe.py's output for the candidate models (``model candidates`` prints their
options), measured on this CPU in this precision: with ``--minutes`` each candidate is
judged by the updates the minutes buy it beside ``--pauses`` validations inside them (each
of the probe's fourth column, the candidate's seconds per validation and save); with
``--updates`` by that number.

The rules (docs/your-data.md has the measurements behind them):

- BPE merges: one per word type seen at least 10 times in the training text, both sides
  (summarisation's rule; Sennrich and Zhang 2019: smaller vocabularies for smaller
  corpora), rounded to 500, 1,000 to 8,000 (on Debian en-de 10,000 merges trained 13%
  slower per update than 8,000 and lost 0.36 BLEU to it in 60 minutes);
- the model: the widest candidate whose updates reach what its width needs to pay
  (``NEEDS``: a wider model learns more per update but starts slower) and whose parameters
  the corpus can feed (at most ``PARAMETERS_PER_TOKEN`` per training token); else the
  narrowest. The probe times the two narrowest, and a wider one only where the minutes
  could buy it its need at the last one's speed (``worth_probing``);
- the batch: 3,000 tokens; with MINUTES, 2,000 where fewer than 1,500 updates fit (more,
  smaller steps);
- dropout from the epochs the updates make: 0.1 up to 12, 0.2 up to 20, 0.3 beyond
  (more passes over the same data need more of it; at 10.6 epochs 0.2 lost to 0.1);
- Adam's peak learning rate: 0.003 up to 256 wide, 0.002 beyond.
"""

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Dict, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from recipe_rules import bpe_merges, given  # noqa: E402

from fconv_plugin.optim.budget_plan import updates_that_fit  # noqa: E402  (the budget's own rule)

MIN_MERGES, MAX_MERGES = 1000, 8000

# name -> (embedding and layer width, encoder layers, decoder layers), kernel 3: the paper's
# fconv_iwslt_de_en (w256) and sizes either side of it
CANDIDATES = {
    "w128": (128, 4, 3),
    "w256": (256, 4, 3),
    "w384": (384, 6, 4),
}
# updates (of 3,000 tokens) a candidate needs before its width pays over the next narrower one;
# measured on one core each (docs/your-data.md): on Debian en-de in 5 minutes, w256's 213 updates
# scored 4.20 BLEU against w128's 428 (of 2,000 tokens) 5.01; in 15, w256's 1,141 (of 2,000) won by
# 0.51 (20.75 against 20.24); on en-es in 15, its 2,118 won by 0.40 (25.70 against 25.30).
# w384's is a guess kept high.
NEEDS = {"w128": 0, "w256": 600, "w384": 4000}
PARAMETERS_PER_TOKEN = 40  # en-es: w256's 27 per training token beat w128's
SMALL_BATCH_BELOW = 1500
DROPOUT_BY_EPOCHS = ((12, 0.1), (20, 0.2), (math.inf, 0.3))


def model_options(name: str) -> str:
    """The fairseq-train options of a candidate (fconv_iwslt_de_en with its widths and depths)."""
    width, encoder, decoder = CANDIDATES[name]
    return (f"--arch fconv_iwslt_de_en --encoder-embed-dim {width} --decoder-embed-dim {width} "
            f"--decoder-out-embed-dim {width} --encoder-layers [({width},3)]*{encoder} "
            f"--decoder-layers [({width},3)]*{decoder}")


def read_probe(path: Path) -> Dict[str, Dict]:
    """speed_probe.py's lines: name -> seconds per update, parameters and (a fourth column, where it
    timed one) seconds per validation and save, else 0."""
    measured = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, seconds, parameters, *pause = line.split("\t")
        measured[name] = {"seconds": float(seconds), "parameters": int(parameters),
                          "pause": float(pause[0]) if pause else 0.0}
    return measured


def updates_bought(minutes: float, measured: Dict, pauses: int) -> int:
    """The updates ``minutes`` buy a probed candidate, its ``pauses`` validations taken first (the budget's rule)."""
    pause = measured.get("pause", 0.0)
    if pauses and not pause:
        raise SystemExit(f"recipe.py: {pauses} validation(s) inside the minutes, but the probe timed none; "
                         "run speed_probe.py with --validation")
    return updates_that_fit(minutes * 60, measured["seconds"], pauses=pauses, seconds_per_pause=pause)


def choose_model(train_tokens: int, updates_of: Dict[str, int], parameters: Dict[str, int]) -> Dict:
    """The widest candidate whose updates reach its NEEDS and whose parameters the corpus feeds."""
    fed = {name: parameters[name] <= PARAMETERS_PER_TOKEN * train_tokens for name in updates_of}
    chosen = min(updates_of, key=lambda name: CANDIDATES[name][0])
    for name in sorted(updates_of, key=lambda name: CANDIDATES[name][0]):
        if updates_of[name] >= NEEDS[name] and fed[name]:
            chosen = name
    listed = ", ".join(f"{name} {updates_of[name]} updates{'' if fed[name] else ' (too big for the corpus)'}"
                       for name in sorted(updates_of, key=lambda name: CANDIDATES[name][0]))
    return {"value": chosen, "why": f"the widest whose updates reach its need ({listed}); "
                                   f"needs {', '.join(f'{n} {u}' for n, u in NEEDS.items())}"}


def dropout_for(epochs: float) -> float:
    return next(value for bound, value in DROPOUT_BY_EPOCHS if epochs <= bound)


def choose(train_tokens: int, updates_of: Dict[str, int], parameters: Dict[str, int], probe_tokens: Optional[int],
           model: Optional[str] = None, max_tokens: Optional[int] = None, dropout: Optional[float] = None,
           lr: Optional[float] = None) -> Dict:
    """The model stage's choices. ``updates_of``: candidate -> its updates: what the minutes buy at the
    probe's batches of ``probe_tokens`` tokens, or (``probe_tokens`` None) a number given, whatever the batch."""
    timed = probe_tokens is not None
    model_choice = given(model) if model else choose_model(train_tokens, updates_of, parameters)
    name = model_choice["value"]
    updates = updates_of[name]
    batch = given(max_tokens) if max_tokens else (
        {"value": 2000, "why": f"fewer than {SMALL_BATCH_BELOW} updates of 3,000 tokens fit: more, smaller steps"}
        if timed and updates < SMALL_BATCH_BELOW else {"value": 3000, "why": "fconv_iwslt_de_en's (the quickstart's)"})
    # a smaller batch takes about proportionally less time (the probe measured 3,000 tokens)
    steps = int(updates * probe_tokens / batch["value"]) if timed else updates
    epochs = steps * batch["value"] / max(train_tokens, 1)
    drop = given(dropout) if dropout is not None else {
        "value": dropout_for(epochs), "why": f"~{epochs:.1f} epochs ({steps} updates of {batch['value']} tokens over "
                                            f"{train_tokens} training tokens): 0.1 up to 12, 0.2 up to 20, 0.3 beyond"}
    width = CANDIDATES[name][0] if name in CANDIDATES else 256
    rate = given(lr) if lr is not None else {"value": 0.003 if width <= 256 else 0.002,
                                 "why": "Adam's peak: 0.003 up to 256 wide, 0.002 beyond"}
    options = ({"value": model_options(name), "why": f"{name}: the paper's fconv_iwslt_de_en at this width and depth"}
               if name in CANDIDATES else {"value": f"--arch {name}", "why": "given (ARCH)"})
    return {"model": model_choice, "model options": options,
            "expected updates": {"value": steps, "why": "what the time buys this model and batch (the probe)"
                                 if timed else "given"},
            "max tokens": batch, "dropout": drop, "lr": rate}


def worth_probing(minutes: float, measured: Dict[str, Dict], pauses: int = 0) -> list:
    """The candidates still to time: the two narrowest first; then each wider one only while
    the minutes, at the widest timed one's speed (a lower bound of its own), buy its need."""
    order = sorted(CANDIDATES, key=lambda name: CANDIDATES[name][0])
    if len(measured) < 2:
        return [name for name in order[:2] if name not in measured]
    widest = max(measured, key=lambda name: CANDIDATES[name][0])
    wider = [name for name in order if CANDIDATES[name][0] > CANDIDATES[widest][0]]
    if wider and updates_bought(minutes, measured[widest], pauses) >= NEEDS[wider[0]]:
        return wider[:1]
    return []


def train_tokens(work: Path, src: str, tgt: str) -> int:
    """What fairseq's --max-tokens counts over an epoch: each pair's longer side in BPE tokens, with </s>."""
    sources, targets = ((work / f"train.bpe.{lang}").read_text(encoding="utf-8").splitlines() for lang in (src, tgt))
    return sum(max(len(s.split()), len(t.split())) + 1 for s, t in zip(sources, targets))


SHELL_NAMES = {"BPE merges": "merges", "model": "model", "model options": "model_options", "max tokens": "max_tokens",
               "dropout": "dropout", "lr": "lr", "expected updates": "expected_updates"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["corpus", "model", "candidates"])
    parser.add_argument("work", type=Path, nargs="?")
    parser.add_argument("src", nargs="?")
    parser.add_argument("tgt", nargs="?")
    parser.add_argument("--merges", type=int)
    parser.add_argument("--minutes", type=float)
    parser.add_argument("--probe", type=Path)
    parser.add_argument("--probe-tokens", type=int, default=3000, help="the batch the probe timed")
    parser.add_argument("--pauses", type=int, default=0, help="validations inside the minutes (the probe timed one)")
    parser.add_argument("--updates", type=int)
    parser.add_argument("--model", help="a candidate, or any --arch (train.sh's ARCH): given, not chosen")
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--dropout", type=float)
    parser.add_argument("--lr", type=float)
    args = parser.parse_args(argv)
    if args.stage == "candidates":  # NAME <TAB> options, for speed_probe.py: those still worth timing
        measured = read_probe(args.probe) if args.probe and args.probe.exists() else {}
        if args.model:
            names = [] if args.model in measured else [args.model]
        else:
            names = worth_probing(args.minutes, measured, args.pauses)
        for name in names:
            print(f"{name}\t{model_options(name) if name in CANDIDATES else '--arch ' + name}")
        return 0
    record = args.work / "recipe.json"
    if args.stage == "corpus":
        lines = [line for lang in (args.src, args.tgt)
                 for line in (args.work / f"train.tok.{lang}").read_text(encoding="utf-8").splitlines()]
        choices = {"training pairs": {"value": len(lines) // 2, "why": "line-aligned training text"},
                   "BPE merges": given(args.merges) if args.merges else bpe_merges(lines, MIN_MERGES, MAX_MERGES)}
    else:
        choices = json.loads(record.read_text(encoding="utf-8"))
        tokens = train_tokens(args.work, args.src, args.tgt)
        if args.minutes is not None:
            measured = read_probe(args.probe)
            updates_of = {name: updates_bought(args.minutes, m, args.pauses) for name, m in measured.items()}
            parameters = {name: m["parameters"] for name, m in measured.items()}
        else:
            updates_of = {name: args.updates for name in ([args.model] if args.model else CANDIDATES)}
            parameters = {name: 0 for name in updates_of}
        choices["training tokens"] = {"value": tokens, "why": "each pair's longer side in BPE tokens (--max-tokens counts these)"}
        choices.update(choose(tokens, updates_of, parameters, args.probe_tokens if args.minutes is not None else None,
                              args.model, args.max_tokens, args.dropout, args.lr))
        if args.minutes is not None and args.pauses:
            pause = measured[choices["model"]["value"]]["pause"]
            choices["expected updates"]["why"] += f", beside {args.pauses} validation(s) of {pause:.1f} s each"
    record.write_text(json.dumps(choices, indent=1) + "\n", encoding="utf-8")
    for name, choice in choices.items():
        if name in SHELL_NAMES:
            print(f"{SHELL_NAMES[name]}={choice['value']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
