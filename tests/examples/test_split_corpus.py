"""examples/bible_es_en/split_corpus.py and the quickstart's TRAIN knob: N training pairs are
N of the pairs a whole split trains on, spread over the Bible, with the same held-out verses."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "examples" / "bible_es_en"


def _split(out: Path, *options):
    return subprocess.run([sys.executable, str(HERE / "split_corpus.py"), str(HERE / "data"), str(out), *options],
                          capture_output=True, text=True, timeout=300)


def _pairs(directory: Path, split: str):
    sides = [(directory / f"{split}.raw.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("es", "en")]
    assert len(sides[0]) == len(sides[1])
    return list(zip(*sides))


@pytest.mark.slow  # normalises the whole Bible once (~10 s)
def test_train_n_keeps_n_of_the_whole_splits_pairs_spread_over_the_bible(tmp_path):
    assert _split(tmp_path / "all", "--valid", "40", "--test", "40", "--max-words", "50").returncode == 0
    assert _split(tmp_path / "some", "--valid", "40", "--test", "40", "--max-words", "50", "--train", "2000").returncode == 0
    for split in ("valid", "test"):  # the same held-out verses either way
        assert _pairs(tmp_path / "some", split) == _pairs(tmp_path / "all", split)
    everything, some = _pairs(tmp_path / "all", "train"), _pairs(tmp_path / "some", "train")
    assert len(some) == 2000
    remaining, positions = iter(enumerate(everything)), []
    for pair in some:  # a subsequence of the whole split's pairs: the same pairs, in the Bible's order
        positions.append(next((i for i, other in remaining if other == pair), None))
        assert positions[-1] is not None, f"{pair} is not among the whole split's training pairs, in order"
    # spread evenly: every tenth of the Bible gives about a tenth of them
    tenths = [sum(1 for p in positions if k * len(everything) // 10 <= p < (k + 1) * len(everything) // 10)
              for k in range(10)]
    assert all(180 <= count <= 220 for count in tenths), tenths


@pytest.mark.parametrize("value, message", [
    ("0", "split_corpus: --train must be a number of verse pairs above 0, got 0"),
    pytest.param("40000", "split_corpus: --train 40000 asks for more than the 30097 training pairs there are",
                 marks=pytest.mark.slow),  # normalises the whole Bible
])
def test_a_train_size_out_of_range_is_one_line(tmp_path, value, message):
    result = _split(tmp_path / "out", "--train", value)
    assert result.returncode == 1 and result.stderr.strip() == message
    if value == "0":
        assert not (tmp_path / "out").exists()  # refused before anything is written


@pytest.mark.parametrize("value", ["abc", "0", "-5"])
def test_the_quickstart_refuses_a_bad_train_knob_before_writing(tmp_path, value):
    result = subprocess.run(["bash", str(HERE / "quickstart.sh")], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "TRAIN": value, "WORK_DIR": str(tmp_path / "run")})
    assert result.returncode == 1
    assert result.stderr.strip() == f"quickstart: error: TRAIN must be a whole number of verse pairs above 0, got '{value}'"
    assert not (tmp_path / "run").exists()
