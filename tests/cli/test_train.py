"""fairseq-train --user-dir fconv_plugin on real command lines."""

import torch
from fairseq import checkpoint_utils

from fconv_plugin.models import FConvModel
from tests.cli.conftest import valid_losses


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
    state = torch.load(save_dir / "checkpoint_best.pt")  # torch's default, weights_only=True
    assert "model" in state
