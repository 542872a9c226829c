"""fairseq-interactive's reader with the plugin: any text stream on sys.stdin, bytes where they exist.

The reference is what fairseq's own reader gives for a text stream (each line stripped,
through fileinput), written out by hand.
"""

import io
import sys

import pytest

from fconv_plugin.compat.interactive_input import buffered_read

LINES = ["ein Satz .", "  zwei  ", "", "drei und vier"]


class TextOnly:
    """A file-like object with lines and nothing else: no .buffer, no fileno."""

    def __init__(self, text):
        self._lines = io.StringIO(text).readlines()

    def __iter__(self):
        return iter(self._lines)


@pytest.mark.parametrize("make_stdin", [io.StringIO, TextOnly], ids=["StringIO", "no .buffer"])
def test_text_streams_are_read_as_fairseq_reads_them(monkeypatch, make_stdin):
    text = "".join(line + "\n" for line in LINES)
    monkeypatch.setattr(sys, "stdin", make_stdin(text))
    batches = list(buffered_read("-", 3))
    assert [len(b) for b in batches] == [3, 1]
    lines = [line for batch in batches for line in batch]
    assert lines == [line.strip() for line in LINES]
    assert [line.number for line in lines] == [1, 2, 3, 4]
    assert all(line.problem is None for line in lines)


def test_bytes_keep_their_one_line_problem_per_undecodable_line(monkeypatch, tmp_path):
    raw = "gut\n".encode() + b"schlecht \xff\n" + "wieder gut\n".encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    from_stdin = [line for batch in buffered_read("-", 10) for line in batch]
    path = tmp_path / "input.txt"
    path.write_bytes(raw)
    from_file = [line for batch in buffered_read(str(path), 10) for line in batch]
    for lines in (from_stdin, from_file):
        assert [str(line) for line in lines] == ["gut", "", "wieder gut"]
        assert [line.problem for line in lines] == [None, "is not valid UTF-8 (byte 0xff at byte 10)", None]
