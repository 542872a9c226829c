"""A checkpoint whose stored layer spec is code is refused before anything runs."""

import torch
import pytest
from fairseq import checkpoint_utils

from fconv_plugin.errors import FConvError
from tests.support import load_raw_checkpoint

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def test_a_checkpoint_whose_layer_spec_is_code_is_refused_and_nothing_runs(trained_checkpoint_copy, tmp_path):
    marker = tmp_path / "pwned"
    state = load_raw_checkpoint(trained_checkpoint_copy)
    hostile = f"__import__('os').system('touch {marker}')"
    state["cfg"]["model"].encoder_layers = hostile
    torch.save(state, trained_checkpoint_copy)
    with pytest.raises(FConvError) as error:
        checkpoint_utils.load_model_ensemble_and_task([str(trained_checkpoint_copy)])
    assert str(error.value).startswith(f"--encoder-layers {hostile!r}: a function call is not allowed (column 1")
    assert not marker.exists()


@pytest.fixture
def trained_checkpoint_copy(trained_model, tmp_path):
    _, save_dir, _ = trained_model
    copy = tmp_path / "copy.pt"
    copy.write_bytes((save_dir / "checkpoint_best.pt").read_bytes())
    return copy
