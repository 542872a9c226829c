"""prepare.py's handling of a user's own corpus (CORPUS=): malformed rows and sizes."""

import lzma
import subprocess
import sys
from pathlib import Path

from .example_scripts import load

REPO = Path(__file__).resolve().parents[2]
PREPARE = REPO / "examples" / "summarise_debian" / "prepare.py"


def _prepare_module():
    return load(PREPARE)


def _corpus(path: Path, lines) -> Path:
    with lzma.open(path, "wt", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def test_malformed_rows_are_counted_by_reason_and_skipped():
    prepare = _prepare_module()
    lines = [
        "pkg-a\tA tool.\tA tool that does things.",
        "pkg-b\tTwo fields only",
        "pkg-c\tA summary\tA document\twith a tab inside",
        "pkg-d\t \tA document without a summary.",
        "",
        "pkg-e\tAnother tool.\tIt does other things.\r",
    ]
    pairs, skipped = prepare.read_pairs(line + "\n" for line in lines)
    assert pairs == [("pkg-a", "A tool.", "A tool that does things."), ("pkg-e", "Another tool.", "It does other things.")]
    assert skipped == {"fewer than 3 tab-separated fields": 2,  # pkg-b and the empty line
                       "more than 3 tab-separated fields (a tab inside a text)": 1, "an empty field": 1}
    assert prepare.skipped_line(skipped, 6) == ("skipped 4 of 6 rows: 2 with fewer than 3 tab-separated fields, "
                                                "1 with more than 3 tab-separated fields (a tab inside a text), "
                                                "1 with an empty field")


def _run(corpus: Path, out: Path, *options):
    return subprocess.run([sys.executable, PREPARE, corpus, out, *options], capture_output=True, text=True)


def test_a_corpus_too_small_for_the_split_stops_with_one_line_naming_the_sizes(tmp_path):
    corpus = _corpus(tmp_path / "small.tsv.xz",
                     [f"pkg{i}\tsummary {i}\tdocument {i} words" for i in range(20)] + ["bad row"])
    result = _run(corpus, tmp_path / "out", "--valid", "10", "--test", "15")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "20 usable pairs (of 21 rows)" in last and "--valid 10 + --test 15" in last
    assert "skipped 1 of 21 rows" in result.stdout
    assert not (tmp_path / "out").exists()  # nothing written


def test_malformed_rows_do_not_stop_the_split(tmp_path):
    good = [f"pkg{i}\tsummary number {i}\tthe document number {i} says more" for i in range(40)]
    corpus = _corpus(tmp_path / "mixed.tsv.xz", good[:20] + ["pkg-x\ta\tb\tc", "pkg-y\t\tdoc"] + good[20:])
    result = _run(corpus, tmp_path / "out", "--valid", "5", "--test", "5")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == ("skipped 2 of 42 rows: 1 with more than 3 tab-separated fields "
                                             "(a tab inside a text), 1 with an empty field")
    counts = sum(len((tmp_path / "out" / f"{split}.syn").read_text(encoding="utf-8").splitlines())
                 for split in ("train", "valid", "test"))
    assert counts == 40
