"""fairseq's fconv names build the plugin's classes once the plugin is loaded."""

import argparse
import json
import os
import subprocess
import sys

import fconv_plugin
from fairseq import models as fairseq_models
from fairseq import utils as fairseq_utils

from fconv_plugin.models import ARCHITECTURES, FConvModel

PLUGIN_DIR = os.path.dirname(fconv_plugin.__file__)
PLUGIN_ONLY_NAMES = ["fconv_gigaword", "fconv_gigaword_copy"]  # summarisation (§5.4), plain and copying; fairseq has neither


def _fairseqs_own_fconv_names():
    """The architectures fairseq registers for fconv, read in a process without the plugin."""
    code = "import json, fairseq.models as m; print(json.dumps(m.ARCH_MODEL_INV_REGISTRY['fconv']))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(result.stdout.splitlines()[-1])


FAIRSEQ_NAMES = _fairseqs_own_fconv_names()


def test_every_fconv_arch_builds_the_plugin_class_after_import_user_module():
    assert "fconv_wmt_en_de" in FAIRSEQ_NAMES and len(FAIRSEQ_NAMES) == 5
    fairseq_utils.import_user_module(argparse.Namespace(user_dir=PLUGIN_DIR))
    assert fairseq_models.MODEL_REGISTRY["fconv"] is FConvModel
    assert sorted(ARCHITECTURES) == sorted(FAIRSEQ_NAMES + PLUGIN_ONLY_NAMES)
    for arch in FAIRSEQ_NAMES + PLUGIN_ONLY_NAMES:
        assert fairseq_models.ARCH_MODEL_REGISTRY[arch] is FConvModel
        assert fairseq_models.ARCH_CONFIG_REGISTRY[arch] is ARCHITECTURES[arch]
    assert sorted(fairseq_models.ARCH_MODEL_INV_REGISTRY["fconv"]) == sorted(FAIRSEQ_NAMES + PLUGIN_ONLY_NAMES)


def test_the_summarisation_architecture_is_the_papers_6_plus_6_layers_of_256():
    args = argparse.Namespace()
    ARCHITECTURES["fconv_gigaword"](args)
    assert args.encoder_layers == args.decoder_layers == "[(256, 3)] * 6"
    assert args.encoder_embed_dim == args.decoder_embed_dim == args.decoder_out_embed_dim == 256


def test_a_fresh_process_logs_the_replacement_once():
    code = (
        "import argparse, logging; logging.basicConfig(level=logging.INFO);"
        "from fairseq import utils, models;"
        f"utils.import_user_module(argparse.Namespace(user_dir={PLUGIN_DIR!r}));"
        f"utils.import_user_module(argparse.Namespace(user_dir={PLUGIN_DIR!r}));"
        "print(models.ARCH_MODEL_REGISTRY['fconv_wmt_en_de'].__module__)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip() == "fconv_plugin.models.fconv"
    replaced = [line for line in result.stderr.splitlines() if "replaced fairseq.models.fconv.FConvModel" in line]
    assert len(replaced) == 1
    assert "fconv_wmt_en_de" in replaced[0]


def test_the_published_model_names_resolve_as_with_fairseqs_fconv():
    from fairseq.models import fconv as reference_fconv

    assert FConvModel.hub_models() == reference_fconv.FConvModel.hub_models()
    assert "conv.wmt14.en-de" in FConvModel.hub_models()
