"""fairseq checkpoints load under torch's weights_only unpickler; nothing else does."""

import os
import pickle
import random

import pytest
import torch
from fairseq import checkpoint_utils

from fconv_plugin.compat.safe_loading import loading_fairseq_checkpoints
from fconv_plugin.errors import FConvError


class _CreatesAFile:
    """Unpickling this (with a permissive loader) would create a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_checkpoint_with_a_foreign_payload_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "created-by-unpickling"
    checkpoint = tmp_path / "evil.pt"
    torch.save({"args": None, "model": {}, "payload": _CreatesAFile(str(marker))}, checkpoint)
    with pytest.raises(FConvError) as error:
        checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))
    assert "refused to load checkpoint" in str(error.value)
    assert "it pickles io.open" in str(error.value)
    assert not marker.exists()
    with pytest.raises(FConvError):
        checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)])
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["truncate", "empty", *[f"garbage{seed}" for seed in range(8)]])
def test_truncated_or_corrupt_checkpoints_get_a_one_line_error(tmp_path, damage):
    good = tmp_path / "good.pt"
    torch.save({"model": {"w": torch.zeros(1000)}}, good)
    bad = tmp_path / "bad.pt"
    data = good.read_bytes()
    if damage.startswith("garbage"):
        bad.write_bytes(random.Random(int(damage[7:])).randbytes(2000))
    else:
        bad.write_bytes({"truncate": data[: len(data) // 2], "empty": b""}[damage])
    with pytest.raises(FConvError) as error:
        checkpoint_utils.load_checkpoint_to_cpu(str(bad))
    message = str(error.value)
    assert f"checkpoint {bad} is truncated or corrupt" in message
    assert "\n" not in message


def test_namespaces_load_while_fairseq_loads_while_torchs_allowlist_stays_as_it_was(tmp_path):
    import argparse

    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in os.environ
    allowlist = list(torch.serialization.get_safe_globals())
    checkpoint = tmp_path / "ns.pt"
    torch.save({"args": argparse.Namespace(arch="fconv"), "model": {}}, checkpoint)
    with loading_fairseq_checkpoints(str(checkpoint)):  # what fairseq's load_checkpoint_to_cpu runs in
        assert torch.load(checkpoint)["args"].arch == "fconv"
    with pytest.raises(pickle.UnpicklingError, match="argparse.Namespace"):
        torch.load(checkpoint)  # torch's default, weights_only=True: the allowance was for fairseq's loader only
    assert list(torch.serialization.get_safe_globals()) == allowlist


def test_numpy_arrays_in_the_training_state_load(tmp_path):
    """fairseq-train --eval-bleu keeps n-gram counts as numpy arrays in extra_state."""
    import argparse

    import numpy

    counts = numpy.array([74, 41, 22, 11], dtype=numpy.int64)
    checkpoint = tmp_path / "bleu.pt"
    torch.save({"args": argparse.Namespace(arch="fconv"), "model": {},
                "extra_state": {"metrics": {"_bleu_counts": counts, "best": numpy.float64(12.5)}}}, checkpoint)
    with loading_fairseq_checkpoints(str(checkpoint)):
        state = torch.load(checkpoint)
    assert state["extra_state"]["metrics"]["_bleu_counts"].tolist() == [74, 41, 22, 11]
