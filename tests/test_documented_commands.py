"""Documented command lines run as written: each is taken from its page, exactly, and run
from a directory where the paths it names hold a real quickstart run (one of a few
updates, ``benchmarks/harness.quick_run``)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


def documented_command(page: str, starts: str) -> str:
    """The fenced bash block of ``docs/<page>`` whose command starts with ``starts``, as written."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    found = [block for block in blocks if block.lstrip().startswith(starts)]
    assert len(found) == 1, f"{page}: {len(found)} bash blocks start with {starts!r}"
    return found[0]


@pytest.fixture
def beside_a_quickstart_run(quickstart_run, tmp_path):
    """A working directory whose examples/bible_es_en/runs/latest is a quickstart run."""
    runs = tmp_path / "examples" / "bible_es_en" / "runs"
    runs.mkdir(parents=True)
    (runs / "latest").symlink_to(quickstart_run)
    return tmp_path


def test_fconv_attention_as_usage_md_writes_it(beside_a_quickstart_run):
    """docs/usage.md's line has no -s/-t: the languages come from the data-bin's files."""
    command = documented_command("usage.md", "fconv-attention")
    result = subprocess.run(["bash", "-c", "set -euo pipefail\n" + command], cwd=beside_a_quickstart_run,
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    written = sorted((beside_a_quickstart_run / "attention").glob("*.png"))
    assert len(written) == 1 and written[0].stat().st_size > 10_000


def test_fconv_translate_needs_no_languages_where_the_data_bin_names_them(quickstart_run, tmp_path):
    """The same crash hydra gave fconv-attention (tokenizer.source_lang=null) reached every
    command of the inference core; the languages now come from the data-bin for all of them."""
    result = subprocess.run([str(BIN / "fconv-translate"), str(quickstart_run / "data-bin"), "--path",
                             str(quickstart_run / "checkpoints" / "checkpoint_best.pt"), "--tokenizer", "moses",
                             "--bpe", "subword_nmt", "--bpe-codes", str(quickstart_run / "codes"), "--no-progress-bar"],
                            input="Y dijo Dios: Sea la luz.\n", capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(result.stdout.splitlines()) == 1 and result.stdout.strip()
