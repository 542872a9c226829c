"""translate_your_data/recipe.py's choices from given corpus statistics and probe speeds, hand-checked."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .example_scripts import load

REPO = Path(__file__).resolve().parents[2]
RECIPE_PATH = REPO / "examples" / "translate_your_data" / "recipe.py"
sys.path.insert(0, str(REPO / "examples" / "lib"))
recipe = load(RECIPE_PATH)

# a Debian en-de-sized corpus: 952,367 training tokens; one core's speeds of 2026-11-29 (the probe's, s/update)
DE_TOKENS = 952_367
PARAMETERS = {"w128": 4_400_000, "w256": 10_500_000, "w384": 23_000_000}


def updates_in(minutes, seconds):
    return {name: int(minutes * 60 / s) for name, s in seconds.items()}


def test_a_short_budget_takes_the_narrow_model_in_smaller_batches():
    updates = updates_in(4.6, {"w128": 0.655, "w256": 1.063})  # 421 and 259 updates of 3,000 tokens
    choices = recipe.choose(DE_TOKENS, updates, PARAMETERS, probe_tokens=3000)
    assert choices["model"]["value"] == "w128"  # w256's 259 updates are short of its 600
    assert choices["max tokens"]["value"] == 2000  # fewer than 1,500 updates of 3,000 tokens
    assert choices["expected updates"]["value"] == 421 * 3000 // 2000
    assert choices["dropout"]["value"] == 0.1  # 631 x 2,000 tokens: 1.3 epochs
    assert choices["lr"]["value"] == 0.003
    assert choices["model options"]["value"] == ("--arch fconv_iwslt_de_en --encoder-embed-dim 128 --decoder-embed-dim 128 "
                                                 "--decoder-out-embed-dim 128 --encoder-layers [(128,3)]*4 "
                                                 "--decoder-layers [(128,3)]*3")


def test_a_longer_budget_takes_the_wider_model_once_its_updates_reach_its_need():
    updates = updates_in(14.8, {"w128": 0.655, "w256": 1.063})  # 1,355 and 835
    choices = recipe.choose(DE_TOKENS, updates, PARAMETERS, probe_tokens=3000)
    assert choices["model"]["value"] == "w256"
    assert choices["max tokens"]["value"] == 2000 and choices["expected updates"]["value"] == 1252
    hour = recipe.choose(DE_TOKENS, updates_in(59.5, {"w128": 0.655, "w256": 1.063, "w384": 2.4}), PARAMETERS, 3000)
    assert hour["model"]["value"] == "w256"  # w384's 1,487 updates are short of its 4,000
    assert hour["max tokens"]["value"] == 3000 and hour["expected updates"]["value"] == 3358
    assert hour["dropout"]["value"] == 0.1  # 3,358 x 3,000 tokens: 10.6 epochs
    faster = recipe.choose(DE_TOKENS, updates_in(59.5, {"w128": 0.2, "w256": 0.3, "w384": 0.6}), PARAMETERS, 3000)
    assert faster["model"]["value"] == "w384" and faster["lr"]["value"] == 0.002


def test_a_small_corpus_gets_more_dropout_and_no_model_it_cannot_feed():
    tokens = 208_809  # Debian en-es
    small = {"w128": 2_000_000, "w256": 5_700_000, "w384": 14_000_000}
    choices = recipe.choose(tokens, updates_in(59.5, {"w128": 0.3, "w256": 0.6, "w384": 0.9}), small, 3000)
    assert choices["model"]["value"] == "w256"  # w384: 67 parameters a token, over the 40 the corpus feeds
    assert "w384 3966 updates (too big for the corpus)" in choices["model"]["why"]
    assert choices["dropout"]["value"] == 0.3  # 5,950 x 3,000 tokens: 85 epochs


def test_dropout_follows_the_epochs():
    assert [recipe.dropout_for(e) for e in (0.5, 12, 12.1, 20, 20.1, 300)] == [0.1, 0.1, 0.2, 0.2, 0.3, 0.3]


def test_updates_given_choose_by_that_number_and_keep_the_batch():
    choices = recipe.choose(DE_TOKENS, {name: 40 for name in recipe.CANDIDATES}, {n: 0 for n in recipe.CANDIDATES}, None)
    assert choices["model"]["value"] == "w128" and choices["max tokens"]["value"] == 3000
    assert choices["expected updates"] == {"value": 40, "why": "given"}


def test_every_choice_can_be_given():
    choices = recipe.choose(DE_TOKENS, {"fconv_wmt_en_de": 100}, {"fconv_wmt_en_de": 1}, 3000, model="fconv_wmt_en_de",
                            max_tokens=1500, dropout=0.25, lr=0.0005)
    for name, value in (("model", "fconv_wmt_en_de"), ("max tokens", 1500), ("dropout", 0.25), ("lr", 0.0005)):
        assert choices[name] == {"value": value, "why": "given (knob set)"}
    assert choices["model options"]["value"] == "--arch fconv_wmt_en_de"


def test_the_probe_times_a_wider_model_only_where_the_minutes_could_pay_for_it():
    assert recipe.worth_probing(5, {}) == ["w128", "w256"]
    timed = {"w128": {"seconds": 0.2}, "w256": {"seconds": 0.3}}
    assert recipe.worth_probing(5, timed) == []  # 1,000 updates at w256's speed: short of w384's 4,000
    assert recipe.worth_probing(60, timed) == ["w384"]  # 12,000
    assert recipe.worth_probing(60, {**timed, "w384": {"seconds": 0.6}}) == []


def test_the_corpus_and_model_stages_write_their_choices_for_the_shell(tmp_path):
    frequent = " ".join(f"w{i}" for i in range(1200))  # 1,200 types, each 10 times a side
    for lang in ("en", "de"):
        (tmp_path / f"train.tok.{lang}").write_text(f"{frequent}\n" * 10, encoding="utf-8")
        (tmp_path / f"train.bpe.{lang}").write_text("a b c\n" * 100, encoding="utf-8")
    run = [sys.executable, str(RECIPE_PATH)]
    corpus = subprocess.run([*run, "corpus", str(tmp_path), "en", "de"], capture_output=True, text=True, check=True)
    assert corpus.stdout.splitlines() == ["merges=1000"]  # 1,200 rounded to 1,000
    (tmp_path / "probe.tsv").write_text("w128\t0.5\t1000\nw256\t1.0\t2000\n", encoding="utf-8")
    model = subprocess.run([*run, "model", str(tmp_path), "en", "de", "--minutes", "20", "--probe", str(tmp_path / "probe.tsv")],
                           capture_output=True, text=True, check=True)
    shell = dict(line.split("=", 1) for line in model.stdout.splitlines())
    assert shell["model"] == "w256" and shell["max_tokens"] == "2000" and shell["expected_updates"] == "1800"
    assert shell["dropout"] == "0.3"  # 1,800 x 2,000 tokens over 400 (each pair's 3 tokens and </s>)
    saved = json.loads((tmp_path / "recipe.json").read_text(encoding="utf-8"))
    assert saved["training pairs"]["value"] == 10 and saved["training tokens"]["value"] == 400


def test_validations_inside_the_minutes_come_out_of_them_at_each_candidates_timed_pause(tmp_path):
    for lang in ("en", "de"):
        (tmp_path / f"train.bpe.{lang}").write_text("a b c\n" * 100, encoding="utf-8")
    (tmp_path / "recipe.json").write_text("{}", encoding="utf-8")
    # 20 minutes, 2 validations inside them: w256 (1.0 s an update, 150 s a pause) keeps 900 s, 900 updates, over
    # its need of 600; in batches of 2,000 tokens (fewer than 1,500 fit), 1,350
    (tmp_path / "probe.tsv").write_text("w128\t0.5\t1000\t60.0\nw256\t1.0\t2000\t150.0\n", encoding="utf-8")
    run = [sys.executable, str(RECIPE_PATH), "model", str(tmp_path), "en", "de", "--minutes", "20",
           "--probe", str(tmp_path / "probe.tsv")]
    paused = subprocess.run([*run, "--pauses", "2"], capture_output=True, text=True, check=True)
    shell = dict(line.split("=", 1) for line in paused.stdout.splitlines())
    assert shell["model"] == "w256" and shell["max_tokens"] == "2000"  # (1,200 - 300) s / 1.0 s: 900 updates
    assert shell["expected_updates"] == str(900 * 3000 // 2000)
    why = json.loads((tmp_path / "recipe.json").read_text(encoding="utf-8"))["expected updates"]["why"]
    assert why.endswith("beside 2 validation(s) of 150.0 s each")
    # the pauses decide the model too: 5 of w256's leave 450 s, 450 updates, short of its need
    (tmp_path / "recipe.json").write_text("{}", encoding="utf-8")
    five = subprocess.run([*run, "--pauses", "5"], capture_output=True, text=True, check=True)
    assert "model=w128" in five.stdout.splitlines()  # (1,200 - 300) / 0.5 = 1,800 updates of w128
    untimed = tmp_path / "untimed.tsv"
    untimed.write_text("w128\t0.5\t1000\n", encoding="utf-8")
    refused = subprocess.run([*run[:-1], str(untimed), "--pauses", "1"], capture_output=True, text=True)
    assert refused.returncode != 0 and "the probe timed none" in refused.stderr.strip().splitlines()[-1]


def test_a_wider_model_is_probed_only_where_the_minutes_left_beside_the_pauses_could_pay_for_it():
    timed = {"w128": {"seconds": 0.2, "pause": 30.0}, "w256": {"seconds": 0.3, "pause": 150.0}}
    assert recipe.worth_probing(24, timed) == ["w384"]  # 1,440 s / 0.3: 4,800 updates at w256's speed
    assert recipe.worth_probing(24, timed, pauses=1) == ["w384"]  # 1,290 s: 4,300, over w384's need of 4,000
    assert recipe.worth_probing(24, timed, pauses=2) == []  # 1,140 s: 3,800, short of it


@pytest.mark.parametrize("lines", [["a"] * 5])
def test_the_merge_rule_is_the_summaries(lines):
    assert recipe.bpe_merges(lines, recipe.MIN_MERGES, recipe.MAX_MERGES)["value"] == 1000


def test_a_large_vocabulary_is_capped_at_the_quickstarts_merges():
    lines = [" ".join(f"w{i}" for i in range(10_032))] * 10  # Debian en-de: 10,032 types seen at least 10 times
    merges = recipe.bpe_merges(lines, recipe.MIN_MERGES, recipe.MAX_MERGES)
    assert merges["value"] == 8000 and merges["why"].startswith("10032 word types occur at least 10 times")
