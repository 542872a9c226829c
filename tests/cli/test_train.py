"""fairseq-train --user-dir fconv_plugin on real command lines."""

import pytest
from fairseq import checkpoint_utils

from fconv_plugin.models import FConvModel
from tests.support import load_raw_checkpoint
from tests.tasks import PAPER_OPTIMIZER, PLUGIN_DIR, SMALL_MODEL, run_tool, valid_losses
pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def test_training_through_the_cli_lowers_the_validation_loss(trained_model):
    _, _, log = trained_model
    assert "replaced fairseq.models.fconv.FConvModel" in log
    losses = valid_losses(log)
    assert len(losses) == 10
    assert losses[-1] < 0.5 * losses[0], losses


def test_the_checkpoint_rebuilds_the_plugin_class(trained_model):
    _, save_dir, _ = trained_model
    models, cfg, _ = checkpoint_utils.load_model_ensemble_and_task([str(save_dir / "checkpoint_best.pt")])
    assert type(models[0]) is FConvModel
    assert cfg.model.arch == "fconv_iwslt_de_en"
    state = load_raw_checkpoint(save_dir / "checkpoint_best.pt")  # torch's weights_only unpickler
    assert "model" in state


def test_a_model_selected_by_validation_bleu_loads_for_generation(word_task, tmp_path):
    """--eval-bleu stores numpy arrays in the checkpoint; generation must still load it."""
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    run_tool(
        "fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER,
        "--max-tokens", "300", "--max-epoch", "2", "--save-dir", save_dir, "--seed", "1",
        "--eval-bleu", "--eval-bleu-args", '{"beam": 1}',
        "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric",
        "--no-progress-bar", "--log-format", "simple", "--no-epoch-checkpoints",
    )
    result = run_tool("fairseq-generate", data_bin, "--user-dir", PLUGIN_DIR,
                      "--path", save_dir / "checkpoint_best.pt", "--beam", "2", "--max-tokens", "500")
    assert len([line for line in result.stdout.splitlines() if line.startswith("H-")]) == 40
