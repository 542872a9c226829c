"""Bad input through fairseq's tools gets one clear line, never a traceback."""


import pytest
from tests.cli.conftest import PLUGIN_DIR, run_tool
from tests.support import load_raw_checkpoint

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools

LONG_LINE = " ".join(["s1"] * 1500)


def _interactive(data_bin, save_dir, raw_input: bytes, *extra):
    return run_tool(
        "fairseq-interactive", data_bin, "--user-dir", PLUGIN_DIR, "--path", save_dir / "checkpoint_best.pt",
        "--source-lang", "src", "--target-lang", "tgt", "--beam", "2", *extra,
        input=raw_input, check=False, text=False,
    )


def test_interactive_reports_and_skips_empty_undecodable_and_too_long_lines(trained_model):
    data_bin, save_dir, _ = trained_model
    raw = b"s1 s2 s3\n\n\xff\xfe s4 s5\n" + LONG_LINE.encode() + b"\ns6 s7\n"
    result = _interactive(data_bin, save_dir, raw, "--skip-invalid-size-inputs-valid-test")
    stdout, stderr = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, stderr[-2000:]
    assert "fconv_plugin: input line 2 is empty; skipped" in stderr
    assert "fconv_plugin: input line 3 is not valid UTF-8 (byte 0xff at byte 1); skipped" in stderr
    assert "fconv_plugin: input line 4 has 1501 tokens, more than the model reads (1022, --max-source-positions); skipped" in stderr
    assert "Traceback" not in stderr
    translated = [line.split("\t")[0] for line in stdout.splitlines() if line.startswith("H-")]
    assert translated == ["H-0", "H-4"]  # numbered as in the input


def test_interactive_stops_on_a_too_long_line_without_the_skip_flag(trained_model):
    data_bin, save_dir, _ = trained_model
    result = _interactive(data_bin, save_dir, b"s1 s2\n" + LONG_LINE.encode() + b"\n")
    stderr = result.stderr.decode()
    assert result.returncode == 1
    assert stderr.strip().splitlines()[-1] == (
        "fconv_plugin: error: input line 2 has 1501 tokens but the model reads at most 1022 "
        "(--max-source-positions); split the line, or pass --skip-invalid-size-inputs-valid-test to skip such lines"
    )
    assert "Traceback" not in stderr


def test_generate_names_the_position_limit_and_honours_the_skip_flag(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    common = ["--user-dir", PLUGIN_DIR, "--path", save_dir / "checkpoint_best.pt", "--beam", "2", "--batch-size", "8"]
    short = run_tool("fairseq-generate", data_bin, *common, "--max-source-positions", "8", check=False)
    assert short.returncode == 1
    last = short.stderr.strip().splitlines()[-1]
    assert last.startswith("fconv_plugin: error: Size of sample #") and "--max-source-positions" in last
    assert "Traceback" not in short.stderr
    skipped = run_tool("fairseq-generate", data_bin, *common, "--max-source-positions", "8", "--skip-invalid-size-inputs-valid-test")
    assert skipped.returncode == 0
    assert 0 < sum(line.startswith("H-") for line in skipped.stdout.splitlines()) < 40


def test_a_checkpoint_with_another_dictionary_names_both_sizes(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    other = tmp_path / "other-bin"
    other.mkdir()
    for name in ("dict.src.txt", "dict.tgt.txt"):
        (other / name).write_text((data_bin / name).read_text())
    with open(other / "dict.tgt.txt", "a") as f:
        f.write("extra1 1\nextra2 1\n")
    for path in data_bin.glob("test.*"):
        (other / path.name).write_bytes(path.read_bytes())
    result = run_tool("fairseq-generate", other, "--user-dir", PLUGIN_DIR, "--path", save_dir / "checkpoint_best.pt", check=False)
    assert result.returncode == 1
    state = load_raw_checkpoint(save_dir / "checkpoint_best.pt")
    trained = state["model"]["decoder.embed_tokens.weight"].size(0)
    assert result.stderr.strip().splitlines()[-1] == (
        f"fconv_plugin: error: the checkpoint was trained with a target dictionary of {trained} symbols but the "
        f"current target dictionary has {trained + 2}; use the dict files the model was trained with"
    )
