"""FConvModel.from_pretrained(...).translate() on a model trained in the test session."""

import json
import os
import subprocess
import sys

import pytest

from fconv_plugin import FConvModel
from tests.tasks import BIN_DIR, PLUGIN_DIR
pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def test_translate_returns_a_detokenised_translation(trained_model, word_task, tmp_path):
    root, _ = word_task
    data_bin, save_dir, _ = trained_model
    codes = tmp_path / "codes"
    with open(root / "train.src") as src, open(codes, "w") as out:
        subprocess.run([str(BIN_DIR / "subword-nmt"), "learn-bpe", "-s", "500"], stdin=src, stdout=out, check=True)
    hub = FConvModel.from_pretrained(
        str(save_dir), checkpoint_file="checkpoint_best.pt", data_name_or_path=str(data_bin),
        tokenizer="moses", bpe="subword_nmt", bpe_codes=str(codes),
    )
    assert type(hub.models[0]) is FConvModel
    assert hub.apply_bpe("s1 s2 s13") == "s1 s2 s13"  # the codes keep these words whole

    sentences = ["s1 s2 s3 s4", "s20 s7 s7 s11 s29", "s5 s0 s14"]
    expected = ["t1 t2 t3 t4", "t20 t7 t7 t11 t29", "t5 t0 t14"]
    translations = hub.translate(sentences, beam=5)
    assert sum(t == e for t, e in zip(translations, expected)) >= 2, translations
    assert hub.sample("s5 s0 s14", beam=1) == hub.translate("s5 s0 s14", beam=1)
    hypotheses = hub.generate(hub.encode("s1 s2"), beam=3)
    assert len(hypotheses) == 3 and all("tokens" in h for h in hypotheses)


def test_from_pretrained_in_a_process_that_only_imported_the_plugin(trained_model):
    """The hub loads fairseq checkpoints under torch >= 2.6 without the host fixes installed,
    and leaves torch's allowlist and fairseq's loader as they were."""
    data_bin, save_dir, _ = trained_model
    code = (
        "import json, torch\n"
        "from fairseq import checkpoint_utils\n"
        "from fconv_plugin import FConvModel, compat\n"
        f"hub = FConvModel.from_pretrained({str(save_dir)!r}, checkpoint_file='checkpoint_best.pt', "
        f"data_name_or_path={str(data_bin)!r})\n"
        "print(json.dumps([hub.translate('s1 s2 s3 s4', beam=5), compat.installed(),"
        " [repr(g) for g in torch.serialization.get_safe_globals()],"
        " hasattr(checkpoint_utils.load_checkpoint_to_cpu, '_fconv_plugin_patches')]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=os.path.dirname(PLUGIN_DIR))
    assert result.returncode == 0, result.stderr[-2000:]
    translation, installed, safe_globals, loader_patched = json.loads(result.stdout.splitlines()[-1])
    assert translation == "t1 t2 t3 t4"
    assert (installed, loader_patched) == (False, False)
    assert not any("Namespace" in name or "numpy" in name for name in safe_globals)
