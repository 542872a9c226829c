"""The plugin's commands on a terminal: a --help that starts with the command's own options
and fits a screen or two, every option of fairseq's still there under --help-all, and no
DEBUG line or host warning on a healthy run (issue 55: 594 lines of help, ~25 lines of
hydra chatter before a command's own)."""

import json
import logging
import subprocess
import sys

import pytest

from tests.tasks import run_tool


def _option_groups(help_text):
    return [line for line in help_text.splitlines() if line.endswith(":") and not line.startswith(" ")]


@pytest.mark.parametrize("command,own", [("fconv-translate", "--max-sentence-tokens"), ("fconv-serve", "--max-queue-sentences")])
def test_help_shows_the_commands_own_options_first_and_help_all_shows_fairseqs(command, own):
    short = run_tool(command, "--help").stdout
    assert short.startswith(f"usage: {command} DATA --path CHECKPOINT")
    assert _option_groups(short)[:2] == [f"{command}:", "options:"]
    assert len(short.splitlines()) <= 80 and own in short and "--beam" in short and "--help-all" in short
    assert "--diverse-beam-groups" not in short  # one of fairseq's rarely needed options
    full = run_tool(command, "--help-all").stdout
    assert len(full.splitlines()) > 300
    for option in ("--diverse-beam-groups", "--no-repeat-ngram-size", "--print-alignment", own, "--beam"):
        assert option in full, option
    assert not full.count("==SUPPRESS==")


def test_importing_the_plugin_leaves_the_programs_logging_as_it_was():
    """fairseq's import calls logging.basicConfig(level=DEBUG) (its text_to_speech task)."""
    script = ("import logging, json; import fconv_plugin; root = logging.getLogger(); "
              "print(json.dumps([root.level, len(root.handlers)]))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(result.stdout.splitlines()[-1]) == [logging.WARNING, 0]
    assert result.stderr == ""


@pytest.mark.slow
def test_a_healthy_run_prints_no_debug_line_and_no_warning(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    source = tmp_path / "in.txt"
    source.write_text("s1 s2 s3\n\ns4 s5\n")
    result = run_tool("fconv-translate", data_bin, "--path", save_dir / "checkpoint_best.pt", "--input", source)
    lines = result.stderr.splitlines()
    assert not [line for line in lines if "DEBUG" in line or "Warning" in line or "ERROR" in line or "hydra" in line], lines
    assert all(" | INFO | " in line or line.startswith("fconv_plugin: ") for line in lines), lines
    assert len(lines) <= 6, lines
