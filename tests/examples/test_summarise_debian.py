"""The summarisation example end to end on a few hundred pairs and a tiny model."""

import json
import lzma
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import warm_commands
from tests.examples.test_quickstart import BUDGET_SPENT

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "summarise_debian"
TINY_MODEL = ("--encoder-layers [(32,3)]*2 --decoder-layers [(32,3)]*2 --encoder-embed-dim 32 "
              "--decoder-embed-dim 32 --decoder-out-embed-dim 32")


def _first_pairs(root: Path, count: int):
    """The shipped Debian corpus's first ``count`` pairs, as a corpus of its own in ``root``."""
    with lzma.open(EXAMPLE / "data" / "descriptions.tsv.xz", "rt", encoding="utf-8") as f:
        rows = [next(f) for _ in range(count)]
    corpus = root / f"first_{count}.tsv.xz"
    with lzma.open(corpus, "wt", encoding="utf-8") as f:
        f.writelines(rows)
    return root, corpus


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    return _first_pairs(tmp_path_factory.mktemp("summarise"), 700)


# A model that learns beats the lead (the first sentence cut to the typical summary's length) on ROUGE-1 and
# ROUGE-L. Measured at this size (the corpus's first 4,000 pairs, LEARNING below; the recipe's 128-wide model),
# ROUGE-1/2/L against the lead's 25.65/12.98/24.60: 2026-12-03, 2-core AMD EPYC, AVX2 only, fp32, seeds 1, 2, 3:
# 28.00/12.39/25.91, 30.13/13.03/27.03, 30.37/14.71/27.80; with LR=0, which learns nothing, 6.95/0.10/5.77;
# 2026-11-29, Zen 5, bf16, seed 1: 30.14/12.45/27.91. ROUGE-2 is not asserted: at this size the model is about
# level with the lead there (at full size it leads by 10.7). About half of the smallest gap (fp32, seed 1:
# +2.35 and +1.31) is asked for; the seeds' spread (2.4 ROUGE-1) is larger than the margin, not learning is 19 below.
LEARNING = {"UPDATES": "1000", "VALID": "60", "TEST": "150", "CURVE": "0"}
ROUGE_1_OVER_LEAD, ROUGE_L_OVER_LEAD = 1.0, 0.6
# A guard against a hang, not a verdict on speed: on 2026-12-03's 2-core AMD EPYC (fp32) this run took 786 s beside
# two CPU-bound processes, and passed 900 s with the suite's other worker beside them too.
LEARNING_HANG_GUARD_S = 2400


@pytest.fixture(scope="module")
def learning_corpus(tmp_path_factory):
    return _first_pairs(tmp_path_factory.mktemp("summarise_learning"), 4000)


def _summarise(corpus, work, **knobs):
    env = {"PATH": f"{warm_commands.bin_dir()}:/usr/bin:/bin", "CORPUS": str(corpus), "WORK_DIR": str(work),
           "VENV": str(warm_commands.venv_dir()), **knobs}
    result = subprocess.run(["bash", EXAMPLE / "summarise.sh"], env=env, capture_output=True, text=True,
                            timeout=LEARNING_HANG_GUARD_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    match = re.search(r"ROUGE-1/2/L F1 ([\d.]+)/([\d.]+)/([\d.]+) vs lead ([\d.]+)/([\d.]+)/([\d.]+)$", result.stdout.strip())
    assert match, result.stdout[-500:]
    scores = [float(x) for x in match.groups()]
    return scores[:3], scores[3:]


@pytest.mark.long
def test_the_model_beats_the_lead(learning_corpus):
    root, corpus = learning_corpus
    (rouge_1, _, rouge_l), (lead_1, _, lead_l) = _summarise(corpus, root / "run", **LEARNING)
    assert rouge_1 >= lead_1 + ROUGE_1_OVER_LEAD and rouge_l >= lead_l + ROUGE_L_OVER_LEAD, (rouge_1, rouge_l, lead_1, lead_l)


def test_prepare_keeps_each_source_package_in_one_split(tiny_corpus):
    root, corpus = tiny_corpus
    out = root / "prepared"
    subprocess.run([sys.executable, EXAMPLE / "prepare.py", corpus, out, "--valid", "60", "--test", "80"],
                   check=True, capture_output=True)
    packages = {split: (out / f"{split}.package").read_text(encoding="utf-8").splitlines()
                for split in ("train", "valid", "test")}
    assert len(packages["valid"]) >= 60 and len(packages["test"]) >= 80
    for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")):
        assert not set(packages[a]) & set(packages[b]), (a, b)
    synopses = (out / "test.raw.syn").read_text(encoding="utf-8").splitlines()
    assert len(synopses) == len(packages["test"])
    n_train = len((out / "train.syn").read_text(encoding="utf-8").splitlines())
    n_valid = len((out / "valid.syn").read_text(encoding="utf-8").splitlines())
    n_test = len((out / "test.syn").read_text(encoding="utf-8").splitlines())
    assert n_train + n_valid + n_test == 700


@pytest.mark.long
def test_the_script_runs_end_to_end_and_ends_with_the_rouge_line(tiny_corpus):
    root, corpus = tiny_corpus
    env = {"PATH": f"{warm_commands.bin_dir()}:/usr/bin:/bin", "CORPUS": str(corpus), "UPDATES": "30",
           "VALID": "40", "TEST": "40", "WORK_DIR": str(root / "run"), "MODEL": TINY_MODEL,
           "VENV": str(warm_commands.venv_dir())}
    result = subprocess.run(["bash", EXAMPLE / "summarise.sh"], env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"summarisation finished in \d+ s, trained in (fp32|bf16) for 30 updates: ROUGE-1/2/L F1 "
                         r"([\d.]+)/([\d.]+)/([\d.]+) vs lead ([\d.]+)/([\d.]+)/([\d.]+)", last)
    assert match, last
    assert all(0 <= float(x) <= 100 for x in match.groups()[1:])
    assert "chosen: --min-len" in result.stdout
    run = root / "run"
    recipe = json.loads((run / "recipe.json").read_text())
    assert recipe["updates"] == {"value": 30, "why": "given (knob set)"}
    for name in ("source words", "BPE merges", "max-len-b"):
        assert f"    {name + ':':16s}{recipe[name]['value']:>7}   {recipe[name]['why']}" in result.stdout
    # the checkpoint is the curve's best by validation ROUGE-L (the later one on a tie)
    curve = [line.split("\t") for line in (run / "curve.tsv").read_text().splitlines()]
    best = max(curve, key=lambda row: (float(row[1]), int(row[0])))
    results = json.loads((run / "results.json").read_text())
    assert results["checkpoint"].endswith(f"_{best[0]}.pt") or (best[0] == "30" and results["checkpoint"].endswith("last.pt"))
    assert f"chosen: the checkpoint after {best[0]} updates" in result.stdout
    hypotheses = (root / "run" / "test.hyp").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == len((root / "run" / "test.raw.syn").read_text(encoding="utf-8").splitlines())
    # no summary cut silently: the count of hypotheses at --max-len-b, from fairseq-generate's P- lines
    positional = [line.split("\t")[1].split() for line in (root / "run" / "test.hyp.generate").read_text().splitlines()
                  if line.startswith("P-")]
    limit = recipe["max-len-b"]["value"]
    at_limit = sum(len(scores) - 1 >= limit for scores in positional)  # the scores include </s>'s
    assert f"  {at_limit} of {len(hypotheses)} test summaries reached the {limit}-token limit" in result.stdout

    again = subprocess.run(["bash", EXAMPLE / "summarise.sh"], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "exists and is not empty" in again.stderr  # nothing overwritten


def test_minutes_name_the_budget_and_end_with_the_updates_that_rerun_them(tiny_corpus, tmp_path):
    _, corpus = tiny_corpus
    env = {"PATH": f"{warm_commands.bin_dir()}:/usr/bin:/bin", "CORPUS": str(corpus), "MINUTES": "0.4", "VALID": "40",
           "TEST": "40", "WORK_DIR": str(tmp_path / "run"), "MODEL": TINY_MODEL, "CURVE": "0",
           "GENERATION": "--min-len 4", "VENV": str(warm_commands.venv_dir())}
    result = subprocess.run(["bash", EXAMPLE / "summarise.sh"], env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert re.match(r"budget: 0.4 minutes of training on this CPU, the speed probe's included; precision: (fp32|bf16) \(", lines[0])
    assert lines[1].startswith("recipe: fconv_gigaword_copy, chosen from the corpus (recipe.py")
    progress = [line for line in lines if "num_updates=" in line]
    assert progress and all(re.search(r"spent_min=[\d.]+, left_min=[\d.]+", line) for line in progress)
    recipe = json.loads((tmp_path / "run" / "recipe.json").read_text())
    why = re.fullmatch(r"what MINUTES=0\.4 buy: ([\d.]+) minutes of training after the speed probe, at ([\d.]+) s per "
                       r"update beside 3 validations of ([\d.]+) s each", recipe["updates"]["why"])
    assert why, recipe["updates"]
    # the validations' timed pauses come out of the minutes before they buy updates (the budget's own rule)
    minutes, per_update, per_pause = (float(x) for x in why.groups())
    assert per_pause > 0 and recipe["updates"]["value"] == max(1, math.floor((minutes * 60 - 3 * per_pause) / per_update))
    match = re.fullmatch(r"summarisation finished in \d+ s, trained in (fp32|bf16) for (\d+) updates in ([\d.]+) minutes "
                         r"\(UPDATES=(\d+) reruns them anywhere\): ROUGE-1/2/L F1 .* vs lead .*", lines[-1])
    assert match and match.group(2) == match.group(4), lines[-1]
    spent = [m for m in (re.fullmatch(BUDGET_SPENT, line) for line in lines) if m]
    assert len(spent) == 1 and spent[0].group(1) == match.group(2), result.stdout[-2000:]
