"""examples/translate_your_data on a few hundred Bible verses and a tiny model."""

import lzma
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import warm_commands

from fconv_plugin import precision

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "translate_your_data" / "train.sh"
BIBLE = REPO / "examples" / "bible_es_en" / "data"
TINY_MODEL = ("--encoder-layers [(32,3)]*2 --decoder-layers [(32,3)]*2 --encoder-embed-dim 32 "
              "--decoder-embed-dim 32 --decoder-out-embed-dim 32")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Raw text named as a user's would be: corpus/{train,valid,test}.{es,en}."""
    root = tmp_path_factory.mktemp("your_data") / "corpus"
    root.mkdir()
    for lang in ("es", "en"):
        with lzma.open(BIBLE / f"bible.{lang}.xz", "rt", encoding="utf-8") as f:
            lines = [next(f) for _ in range(460)]
        for split, (start, end) in {"train": (0, 400), "valid": (400, 430), "test": (430, 460)}.items():
            (root / f"{split}.{lang}").write_text("".join(lines[start:end]), encoding="utf-8")
    return root


def _run(corpus, work_dir, timeout=900, **knobs):
    env = {"PATH": f"{warm_commands.bin_dir()}:/usr/bin:/bin", "VENV": str(warm_commands.venv_dir()),
           "UPDATES": "40", "BPE_MERGES": "500", "ARCH_ARGS": TINY_MODEL, "WORK_DIR": str(work_dir), **knobs}
    return subprocess.run(["bash", SCRIPT, "es", "en", corpus / "train", corpus / "valid", corpus / "test"],
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_raw_text_in_model_and_bleu_out(corpus, tmp_path):
    work = tmp_path / "run"
    result = _run(corpus, work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    chosen = "bf16" if precision.bf16_units() else "fp32"  # PRECISION=auto
    assert f"training precision: {chosen} (" in result.stdout.splitlines()[1]
    match = re.fullmatch(rf"translate_your_data finished in \d+ s: fconv_iwslt_de_en, 40 updates, {chosen}, "
                         r"BLEU ([\d.]+) chrF ([\d.]+)", last)
    assert match, last
    assert all(0 <= float(x) <= 100 for x in match.groups())
    assert (work / "checkpoints" / "checkpoint_best.pt").is_file()
    hypotheses = (work / "test.hyp.en").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == 30  # every test sentence, detokenised
    assert "fairseq-interactive" in result.stdout
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if "Dictionary:" in line] == ["[es] Dictionary", "[en] Dictionary"]
    # shown while training, every 10 of the 40 updates: progress, and validation with BLEU
    progress = [line for line in lines if line.startswith("epoch") and "num_updates=" in line]
    validation = [line for line in lines if "| valid on 'valid' subset |" in line and "| bleu " in line]
    assert len(progress) >= 3 and len(validation) == 4, result.stdout[-3000:]

    again = _run(corpus, work, timeout=60)
    assert again.returncode != 0 and "exists and is not empty" in again.stderr  # nothing overwritten


def test_text_that_is_not_line_aligned_is_refused_with_one_line(corpus, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    for split in ("train", "valid", "test"):
        for lang in ("es", "en"):
            (bad / f"{split}.{lang}").write_text((corpus / f"{split}.{lang}").read_text(encoding="utf-8"), encoding="utf-8")
    with open(bad / "valid.en", "a", encoding="utf-8") as f:
        f.write("one line too many\n")
    result = _run(bad, tmp_path / "never", timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == (f"translate_your_data: error: {bad}/valid.es has 30 lines but {bad}/valid.en has 31; "
                                      "give line-aligned text")
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("setting", ["bf16", "half"])
def test_a_precision_this_cpu_cannot_train_in_is_refused_before_anything_is_written(corpus, tmp_path, setting):
    if setting == "bf16" and precision.bf16_units() is not None:
        pytest.skip(f"this CPU has bfloat16 units ({precision.bf16_units()}): PRECISION=bf16 trains")
    result = _run(corpus, tmp_path / "run", PRECISION=setting)
    assert result.returncode == 1 and result.stdout == ""
    expected = {"bf16": "PRECISION=bf16 on the CPU needs bfloat16 units (AMX-BF16 or AVX-512 BF16) and this CPU has "
                        "none (bfloat16 would run many times slower than float32 here); drop PRECISION=bf16 to run in "
                        "float32",
                "half": "PRECISION must be one of auto, fp32, bf16, got 'half'"}[setting]
    assert result.stderr.strip() == f"translate_your_data: error: {expected}"
    assert not (tmp_path / "run").exists()
