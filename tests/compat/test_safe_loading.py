"""fairseq checkpoints load under torch's weights_only unpickler; nothing else does."""

import io
import os
import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import torch
from fairseq import checkpoint_utils

from fconv_plugin.checkpoint_io import loading_fairseq_checkpoints
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
    allowlist = set(torch.serialization.get_safe_globals())  # a set inside torch: its order may change
    checkpoint = tmp_path / "ns.pt"
    torch.save({"args": argparse.Namespace(arch="fconv"), "model": {}}, checkpoint)
    with loading_fairseq_checkpoints(str(checkpoint)):  # what fairseq's load_checkpoint_to_cpu runs in
        assert torch.load(checkpoint)["args"].arch == "fconv"
    with pytest.raises(pickle.UnpicklingError, match="argparse.Namespace"):
        torch.load(checkpoint)  # torch's default, weights_only=True: the allowance was for fairseq's loader only
    assert set(torch.serialization.get_safe_globals()) == allowlist


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


# --- fuzzing: random bytes, truncations and byte flips of a real checkpoint ---

FUZZ_EXAMPLES = 400  # per strategy; derandomized, so CI tries the same files every time
_FUZZ = settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def checkpoint_bytes(checkpoint_bytes_as_written):
    """The fuzzed checkpoint as fairseq before 0.10 wrote it (below: both forms)."""
    return checkpoint_bytes_as_written[FORMS[0]]


def _loads_or_one_line_error(path):
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(str(path))
    except FConvError as error:
        assert "\n" not in str(error) and str(path) in str(error)
        return None
    assert isinstance(state, dict)
    return state


@_FUZZ
@given(data=st.binary(max_size=4096))
def test_fuzz_random_bytes(tmp_path, data):
    path = tmp_path / "random.pt"
    path.write_bytes(data)
    assert _loads_or_one_line_error(path) is None


@_FUZZ
@given(fraction=st.floats(0.0, 1.0, exclude_max=True))
def test_fuzz_truncated(checkpoint_bytes, tmp_path, fraction):
    path = tmp_path / "truncated.pt"
    path.write_bytes(checkpoint_bytes[: int(fraction * len(checkpoint_bytes))])
    assert _loads_or_one_line_error(path) is None


FORMS = ("fairseq < 0.10: args", "fairseq 0.12: cfg")  # the checkpoint's two forms, fuzzed below


def _saved(state) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def checkpoint_bytes_as_written():
    """The fuzzed checkpoint in both forms users have: as fairseq before 0.10 wrote it (its
    configuration an ``args`` Namespace, which loading converts through hydra) and as fairseq
    0.12's fairseq-train writes it (``args`` None, ``cfg`` a dict of plain values holding the
    model's Namespace): what loading the first makes of it, saved again."""
    from omegaconf import OmegaConf

    from tests.support import DictionaryTask, build_plugin_model, make_dictionary, model_args

    task = DictionaryTask(make_dictionary(20), make_dictionary(20))
    overrides = dict(encoder_layers="[(16, 3)] * 2", decoder_layers="[(16, 3)] * 2", encoder_embed_dim=8,
                     decoder_embed_dim=8, decoder_out_embed_dim=8)
    state = {
        "args": model_args("fconv_iwslt_de_en", **overrides),
        "model": build_plugin_model("fconv_iwslt_de_en", task, **overrides).state_dict(),
        "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "NAG",
                               "lr_scheduler_state": {"best": 3.5}, "num_updates": 40}],
        "extra_state": {"train_iterator": {"epoch": 2}, "val_loss": 3.5},
    }
    old, new = FORMS
    written = {old: _saved(state)}
    upgraded = dict(_original_state(written[old]), args=None)
    upgraded["cfg"] = OmegaConf.to_container(upgraded["cfg"], resolve=True, enum_to_str=True)
    written[new] = _saved(upgraded)
    return written


def test_both_forms_of_the_fuzzed_checkpoint_load_whole(checkpoint_bytes_as_written, tmp_path):
    for form, data in checkpoint_bytes_as_written.items():
        path = tmp_path / "checkpoint.pt"
        path.write_bytes(data)
        state = _loads_or_one_line_error(path)
        assert state["optimizer_history"][-1]["num_updates"] == 40, form
        assert (state["args"] is None) == (form == FORMS[1]) and state["cfg"]["model"].arch == "fconv_iwslt_de_en"


@pytest.mark.slow  # a flip that loads goes through fairseq's upgrade of checkpoints (hydra's, ~0.15 s, for args)
@pytest.mark.long
@_FUZZ
@given(form=st.sampled_from(FORMS),
       flips=st.lists(st.tuples(st.floats(0.0, 1.0, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=6))
def test_fuzz_flipped_bytes(checkpoint_bytes_as_written, tmp_path, form, flips):
    written = checkpoint_bytes_as_written[form]
    data = bytearray(written)
    for where, value in flips:
        data[int(where * len(data))] = value
    path = tmp_path / "flipped.pt"
    path.write_bytes(bytes(data))
    state = _loads_or_one_line_error(path)  # a one-line error, asserted there, or what loaded:
    if state is not None:  # a flip inside a weight's bytes or a name: the checkpoint, its tensors as written
        original = _original_state(written)
        assert [(t.shape, t.dtype) for t in state["model"].values()] == \
            [(t.shape, t.dtype) for t in original["model"].values()]
        assert isinstance(state["optimizer_history"], list) and len(state["optimizer_history"]) == 1


_ORIGINALS = {}


def _original_state(checkpoint_bytes):
    """The unflipped checkpoint as the plugin loads it (once a checkpoint)."""
    if checkpoint_bytes not in _ORIGINALS:
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".pt", delete=False) as f:
            f.write(checkpoint_bytes)
        try:
            _ORIGINALS[checkpoint_bytes] = checkpoint_utils.load_checkpoint_to_cpu(f.name)
        finally:
            os.remove(f.name)
    return _ORIGINALS[checkpoint_bytes]
