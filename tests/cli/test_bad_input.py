"""Bad input through fairseq's tools gets one clear line, never a traceback."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.tasks import PLUGIN_DIR, run_tool
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


def _damage_truncated_bin(data_bin):
    path = data_bin / "test.src-tgt.src.bin"
    path.write_bytes(path.read_bytes()[:-7])
    return path, "is truncated"


def _damage_truncated_idx(data_bin):
    path = data_bin / "test.src-tgt.tgt.idx"
    path.write_bytes(path.read_bytes()[:40])
    return path, "has 40 bytes but its header promises"


def _damage_foreign_idx(data_bin):
    path = data_bin / "test.src-tgt.src.idx"
    path.write_bytes(b"not an index at all\n" * 10)
    return path, "is not a fairseq index"


def _damage_token_ids(data_bin):
    path = data_bin / "test.src-tgt.tgt.bin"
    data = bytearray(path.read_bytes())
    data[0:2] = (60000).to_bytes(2, "little")  # the dictionary is small: ids are uint16
    path.write_bytes(bytes(data))
    return path, "holds token id 60000, outside its dictionary"


@pytest.mark.parametrize("damage", [_damage_truncated_bin, _damage_truncated_idx, _damage_foreign_idx, _damage_token_ids])
def test_a_damaged_data_bin_names_the_file_in_one_line(trained_model, tmp_path, damage):
    data_bin, save_dir, _ = trained_model
    damaged = tmp_path / "data-bin"
    damaged.mkdir()
    for path in data_bin.iterdir():
        (damaged / path.name).write_bytes(path.read_bytes())
    path, problem = damage(damaged)
    result = run_tool("fairseq-generate", damaged, "--user-dir", PLUGIN_DIR, "--path", save_dir / "checkpoint_best.pt",
                      "--beam", "2", check=False)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"fconv_plugin: error: {path} {problem}") and "re-run fairseq-preprocess" in last, last


# --- fuzzing fairseq-interactive's input: one process reads every generated line ---

INTERACTIVE_RUNS = 4  # processes, each reading LINES_PER_RUN generated lines and then a sentinel
LINES_PER_RUN = 150
_TEXT_LINES = st.one_of(
    st.text(max_size=80),  # any Unicode, control characters included
    st.text(alphabet=st.characters(categories=["Mn", "Me"]), min_size=1, max_size=20),  # combining marks only
    st.text(alphabet=st.characters(min_codepoint=0x0590, max_codepoint=0x06FF), min_size=1, max_size=40),  # RTL
    st.lists(st.sampled_from(["s1", "s2", "@@", "@@@@", "\u202e", "\u200f", "\ufeff"]), max_size=12).map(" ".join),
    st.lists(st.sampled_from(["@@", "@@ ", " @@", "@"]), min_size=1, max_size=30).map("".join),  # BPE markers only
    st.integers(1023, 3000).map(lambda n: " ".join(["s1"] * n)),  # longer than the model reads
)
_LINES = st.one_of(
    _TEXT_LINES.map(lambda text: text.encode("utf-8")),
    st.binary(max_size=60),  # invalid UTF-8 most of the time
).map(lambda raw: raw.replace(b"\n", b" "))


@settings(max_examples=INTERACTIVE_RUNS, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large,
                                 HealthCheck.too_slow, HealthCheck.large_base_example])
@given(lines=st.lists(_LINES, min_size=LINES_PER_RUN, max_size=LINES_PER_RUN))
def test_fuzz_interactive_input_every_line_translated_or_skipped_in_one_line(trained_model, lines):
    data_bin, save_dir, _ = trained_model
    raw = b"\n".join(lines) + b"\ns1 s2 s3\n"  # the sentinel: the process is still translating
    result = _interactive(data_bin, save_dir, raw, "--skip-invalid-size-inputs-valid-test",
                          "--buffer-size", "32", "--batch-size", "32")
    stdout, stderr = result.stdout.decode(), result.stderr.decode(errors="replace")
    assert result.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    translated = {int(line.split("\t")[0][2:]) for line in stdout.splitlines() if line.startswith("H-")}
    skipped = {int(n) - 1 for n in re.findall(r"^fconv_plugin: input line (\d+) .*; skipped$", stderr, re.MULTILINE)}
    assert len(lines) in translated  # the sentinel, numbered after every generated line
    assert translated | skipped == set(range(len(lines) + 1)) and not translated & skipped
