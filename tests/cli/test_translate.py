"""fconv-translate: a document in, its translation out, as fairseq-interactive translates its lines."""

import random

import pytest

from tests.tasks import interactive_answers, run_tool
pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def _line(rng):
    return " ".join(f"s{rng.randrange(30)}" for _ in range(rng.randint(3, 9)))


def test_a_file_keeps_its_paragraphs_and_each_line_is_fairseq_interactives(trained_model, int8_checkpoint, tmp_path):
    data_bin, save_dir, _ = trained_model
    checkpoint = save_dir / "checkpoint_best.pt"
    rng = random.Random(4)
    lines = [_line(rng) for _ in range(7)]
    text = f"{lines[0]}\n{lines[1]}\n\n  {lines[2]}\n{lines[3]}\n\n\n{lines[4]}\n{lines[5]}\n{lines[6]}\n"
    source = tmp_path / "document.txt"
    source.write_text(text, encoding="utf-8")
    output = tmp_path / "translated.txt"
    result = run_tool("fconv-translate", data_bin, "--path", checkpoint, "--beam", "5", "--input", source,
                      "--output", output)
    assert "translated 7 sentences" in result.stderr
    translated = output.read_text(encoding="utf-8").split("\n")
    expected = [answer["text"] for answer in interactive_answers(data_bin, checkpoint, lines)]
    assert translated == [expected[0], expected[1], "", "  " + expected[2], expected[3], "", "",
                          expected[4], expected[5], expected[6], ""]
    # stdin to stdout gives the same, and an int8 checkpoint translates it too
    assert run_tool("fconv-translate", data_bin, "--path", checkpoint, input=text).stdout == output.read_text()
    # in two decoding processes, one batch each (--batch-size 2), too
    assert run_tool("fconv-translate", data_bin, "--path", checkpoint, "--workers", "2", "--batch-size", "2",
                    input=text).stdout == output.read_text()
    int8_text = run_tool("fconv-translate", data_bin, "--path", int8_checkpoint, input=text).stdout
    assert int8_text.count("\n") == text.count("\n") and all(word.startswith("t") for word in int8_text.split())


def test_bad_input_and_options_get_one_line_and_nothing_is_overwritten(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    checkpoint = save_dir / "checkpoint_best.pt"
    binary = tmp_path / "latin1.txt"
    binary.write_bytes("s1 s2\nca\xf1on s3\n".encode("latin-1"))
    result = run_tool("fconv-translate", data_bin, "--path", checkpoint, "--input", binary, check=False)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].startswith(f"fconv_plugin: error: {binary} is not UTF-8 text (byte 0xf1 on line 2)")
    same = tmp_path / "same.txt"
    same.write_text("s1 s2\n")
    result = run_tool("fconv-translate", data_bin, "--path", checkpoint, "--input", same, "--output", same, check=False)
    assert "is the input file" in result.stderr.strip().splitlines()[-1] and same.read_text() == "s1 s2\n"
    result = run_tool("fconv-translate", data_bin, "--path", checkpoint, "--workers", "0", input="s1\n", check=False)
    assert result.stderr.strip().splitlines()[-1] == ("fconv_plugin: error: workers 0: give a whole number of decoding "
                                                      "processes, 1 or more")
    kept = tmp_path / "kept.txt"
    kept.write_text("a translation written before\n")
    result = run_tool("fconv-translate", data_bin, "--path", checkpoint, "--output", kept, input=" \n\n", check=False)
    assert result.returncode != 0 and result.stderr.strip().splitlines()[-1] == (
        "fconv_plugin: error: the standard input holds no text to translate (nothing was written)")
    assert kept.read_text() == "a translation written before\n"
    result = run_tool("fconv-translate", data_bin, "--path", tmp_path / "none.pt", input="s1\n", check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
