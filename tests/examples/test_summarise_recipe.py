"""recipe.py's corpus-dependent choices against small synthetic corpora of known statistics."""

import json
import subprocess
import sys
from pathlib import Path

from .example_scripts import load

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "examples" / "summarise_debian" / "recipe.py"


recipe = load(RECIPE)


def test_percentile_is_the_nearest_rank():
    assert recipe.percentile([5, 1, 3, 2, 4], 0.5) == 3
    assert recipe.percentile(list(range(1, 101)), 0.99) == 99
    assert recipe.percentile(list(range(1, 101)), 0.9) == 90
    assert recipe.percentile([7], 0.99) == 7


def test_the_source_cut_is_six_summaries_long_within_its_bounds():
    long_documents = [500] * 10
    assert recipe.source_cut(long_documents, [5, 5, 7, 9, 30])["value"] == 42  # median summary 7
    assert recipe.source_cut(long_documents, [2] * 9)["value"] == 20  # 12, raised to the floor
    assert recipe.source_cut(long_documents, [100] * 9)["value"] == 400  # 600, lowered to the ceiling
    # documents of 16 to 25 tokens (90th percentile 24): a cut at 60 would keep them whole anyway
    assert recipe.source_cut(list(range(16, 26)), [10] * 9)["value"] == 24


def test_merges_count_the_word_types_seen_ten_times():
    frequent = [f"w{i}" for i in range(2400)]  # each 10 times
    rare = [f"r{i}" for i in range(5000)]  # each 9 times
    lines = [" ".join(frequent)] * 10 + [" ".join(rare)] * 9
    choice = recipe.bpe_merges(lines)
    assert choice["value"] == 2500  # 2400 rounded to 500
    assert "2400 word types occur at least 10 times" in choice["why"] and "7400 types" in choice["why"]
    assert recipe.bpe_merges(["a b c"] * 20)["value"] == 1000  # 3, raised to the floor
    assert recipe.bpe_merges([" ".join(f"w{i}" for i in range(25000))] * 10)["value"] == 20000


def test_max_len_b_is_twice_the_99th_percentile_of_summaries():
    assert recipe.max_len_b(list(range(1, 101)))["value"] == 198
    assert recipe.max_len_b([3] * 100)["value"] == 16  # 6, raised to the floor


def test_updates_are_ten_epochs_within_the_budget():
    assert recipe.updates(100 * 4000, 4000)["value"] == 1000  # 100 batches an epoch
    assert recipe.updates(123 * 4000 - 1, 4000)["value"] == 1200  # 123 batches: 1230, rounded to 100
    assert recipe.updates(10 * 4000, 4000)["value"] == 600  # 100, raised to the floor
    assert recipe.updates(1000 * 4000, 4000)["value"] == 2300  # 10,000, the 15-minute budget


def _work_dir(tmp_path: Path) -> Path:
    """Training summaries of 4 tokens (median), documents of 40 tokens; valid and test of 2 pairs."""
    documents = [" ".join(f"d{j}" for j in range(40))] * 30
    summaries = ["s1 s2 s3 s4"] * 20 + ["s1 s2"] * 10
    (tmp_path / "train.full.desc").write_text("\n".join(documents) + "\n")
    (tmp_path / "train.syn").write_text("\n".join(summaries) + "\n")
    for split in ("valid", "test"):
        (tmp_path / f"{split}.full.desc").write_text("\n".join(documents[:2]) + "\n")
    return tmp_path


def _run(work: Path, *options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, RECIPE, *options[:1], work, *options[1:]], capture_output=True, text=True,
                          check=True)


def test_the_words_stage_cuts_every_split_and_records_why(tmp_path):
    work = _work_dir(tmp_path)
    result = _run(work, "words")
    assert result.stdout.splitlines() == ["source_words=24", "merges=1000"]  # 6 x 4; 28 frequent types, raised to the floor
    for split in ("train", "valid", "test"):
        lines = (work / f"{split}.desc").read_text().splitlines()
        assert lines and all(line == " ".join(f"d{j}" for j in range(24)) for line in lines)
    recorded = json.loads((work / "recipe.json").read_text())
    assert recorded["training pairs"]["value"] == 30
    assert recorded["source words"]["value"] == 24 and "median summary (4 tokens)" in recorded["source words"]["why"]


def test_a_knob_the_user_set_is_kept_and_marked_given(tmp_path):
    work = _work_dir(tmp_path)
    assert _run(work, "words", "--source-words", "10", "--merges", "777").stdout.split() == \
        ["source_words=10", "merges=777"]
    assert (work / "train.desc").read_text().splitlines()[0].split() == [f"d{j}" for j in range(10)]
    (work / "train.bpe.desc").write_text("a b c\n" * 30)
    (work / "train.bpe.syn").write_text("x y\n" * 30)
    result = _run(work, "bpe", "--updates", "55", "--max-tokens", "100")
    assert result.stdout.splitlines() == ["source_words=10", "merges=777", "max_summary_tokens=16", "updates=55"]
    recorded = json.loads((work / "recipe.json").read_text())
    assert recorded["updates"] == {"value": 55, "why": "given (knob set)"}
    assert recorded["source words"]["why"] == "given (knob set)"


def test_the_bpe_stage_counts_each_pairs_longer_side_as_fairseqs_batches_do(tmp_path):
    work = _work_dir(tmp_path)
    _run(work, "words")
    # 200 pairs whose document is longer (3 + </s>), 100 whose summary is (6 + </s>): 800 + 700 = 1500 tokens
    (work / "train.bpe.desc").write_text("a b c\n" * 300)
    (work / "train.bpe.syn").write_text("x y\n" * 200 + "x y z x y z\n" * 100)
    recorded_stdout = _run(work, "bpe", "--max-tokens", "10").stdout.splitlines()
    assert recorded_stdout[-1] == "updates=1500"  # 150 batches an epoch, 10 epochs
    why = json.loads((work / "recipe.json").read_text())["updates"]["why"]
    assert "150 batches of 10 tokens (1500 tokens, each pair's longer side)" in why
