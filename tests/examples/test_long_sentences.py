"""examples/bible_es_en/long_sentences.py (the figures behind the documents' sentence cut)
runs on a real quickstart run, and its first row is the model's own cut."""

import math
import subprocess
from pathlib import Path

import pytest

from fconv_plugin.inference import Translator
from tests import warm_commands

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_long_sentences_are_scored_at_the_models_cut_first(quickstart_run):
    result = subprocess.run([str(warm_commands.bin_dir() / "python"), str(ROOT / "examples" / "bible_es_en" / "long_sentences.py"),
                             str(quickstart_run), "--sentences", "2"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    cut = Translator.from_pretrained(str(quickstart_run / "checkpoints" / "checkpoint_best.pt"),
                                     str(quickstart_run / "data-bin")).sentence_cut
    train = [len(line.split()) + 1 for line in (quickstart_run / "train.bpe.es").read_text().splitlines()]
    assert cut == sorted(train)[math.ceil(len(train) * 0.9) - 1]  # the training sources' 90th percentile
    assert lines[0].startswith("2 sentences of ") and lines[0].endswith(f"the model's cut: {cut} tokens")
    rows = [line.split(" | ") for line in lines[3:]]
    assert [int(row[0].strip("| ")) for row in rows][0] == cut and len(rows) >= 5
    assert all(len(row[2].strip(" |").split()) == 2 for row in rows)
