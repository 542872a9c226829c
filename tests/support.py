"""Shared helpers: dictionaries, models paired with fairseq's reference, batches."""

import argparse
import copy
import socket

import torch
from fairseq.data import Dictionary
from fairseq.models import fconv as reference_fconv  # the reference implementation

import fconv_plugin  # noqa: F401  (registers the plugin)
from fconv_plugin.checkpoint_io import loading_fairseq_checkpoints
from fconv_plugin.models import ARCHITECTURES, FConvModel


def make_dictionary(num_words: int, prefix: str = "w") -> Dictionary:
    dictionary = Dictionary()
    for i in range(num_words):
        dictionary.add_symbol(f"{prefix}{i}")
    dictionary.finalize(padding_factor=1)
    return dictionary


class DictionaryTask:
    """The two attributes build_model reads from a fairseq task."""

    def __init__(self, source_dictionary, target_dictionary):
        self.source_dictionary = source_dictionary
        self.target_dictionary = target_dictionary


def model_args(arch: str, **overrides) -> argparse.Namespace:
    args = argparse.Namespace(arch=arch, max_source_positions=1024, max_target_positions=1024, dropout=0.0)
    for name, value in overrides.items():
        setattr(args, name, value)
    ARCHITECTURES[arch](args)
    return args


def build_plugin_model(arch: str, task: DictionaryTask, **overrides) -> FConvModel:
    return FConvModel.build_model(model_args(arch, **overrides), task)


def build_pair(arch: str, task: DictionaryTask, **overrides):
    """(plugin model, fairseq's model) with fairseq's random weights loaded into both."""
    args = model_args(arch, **overrides)
    reference = reference_fconv.FConvModel.build_model(copy.deepcopy(args), task)
    ours = FConvModel.build_model(copy.deepcopy(args), task)
    ours.load_state_dict(reference.state_dict(), strict=True)
    return ours, reference


def translation_batch(src_dict: Dictionary, tgt_dict: Dictionary, src_lengths, tgt_lengths, seed: int = 0):
    """Left-padded sources and right-padded decoder inputs of unequal lengths."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.full((len(src_lengths), max(src_lengths)), src_dict.pad())
    for row, length in enumerate(src_lengths):
        src[row, -length:] = torch.randint(src_dict.nspecial, len(src_dict), (length,), generator=generator)
        src[row, -1] = src_dict.eos()
    prev = torch.full((len(tgt_lengths), max(tgt_lengths)), tgt_dict.pad())
    target = prev.clone()
    eos = torch.tensor([tgt_dict.eos()])
    for row, length in enumerate(tgt_lengths):
        words = torch.randint(tgt_dict.nspecial, len(tgt_dict), (length - 1,), generator=generator)
        target[row, :length] = torch.cat([words, eos])
        prev[row, :length] = torch.cat([eos, words])
    lengths = src.ne(src_dict.pad()).sum(dim=1)
    return src, lengths, prev, target


def decode_step_by_step(model, src, lengths, prev):
    """The decoder's outputs one target position at a time (incremental state), as beam search runs it."""
    with torch.no_grad():
        encoder_out = model.encoder(src, lengths)
        state = {}
        return [model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state) for t in range(prev.size(1))]


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    scale = expected.abs().max().clamp_min(1e-30)
    return float((actual - expected).abs().max() / scale)


def load_raw_checkpoint(path) -> dict:
    """A fairseq checkpoint file as saved (no upgrade), through the plugin's safe loader."""
    with loading_fairseq_checkpoints(str(path)):
        return torch.load(path)


def checkpoint_updates(path) -> int:
    """The number of updates a fairseq checkpoint file was saved at."""
    return load_raw_checkpoint(path)["optimizer_history"][-1]["num_updates"]


def ended_within_its_budget(outcome: dict) -> bool:
    """The budget's stop as it holds on any machine (``time_budget.json``): the run ends within 3% of its
    budget, or within what its last update took beyond the least time the plan gave it when it let that
    update happen (an update under way is not cut; a loaded machine can make one longer than planned)."""
    over = outcome["trained_seconds"] - outcome["budget_seconds"]
    beyond_plan = outcome["last_update_seconds"] - outcome["last_update_planned_seconds"]
    return over <= max(0.03 * outcome["budget_seconds"], beyond_plan) + 1e-9


def budget_state(path):
    """A checkpoint's budget plan state, fairseq's clock (seconds trained) and the checkpoint itself."""
    checkpoint = load_raw_checkpoint(path)
    return (checkpoint["optimizer_history"][-1]["lr_scheduler_state"]["budget"],
            checkpoint["extra_state"]["previous_training_time"], checkpoint)


def annealed_bound(state, outcome: dict, checkpoint) -> float:
    """The most the last update of a budgeted run may train with: the linear decay's value (the run's
    ``--decay-fraction``, by default all after ``--warmup-fraction``) for the budget's fraction left at the reading
    that let it happen, counted from the first update's end, with a rounding's slack (the plan computes the same
    value in another order). ``state`` and ``checkpoint`` as ``budget_state`` reads them, ``outcome`` the run's
    ``time_budget.json``."""
    schedule = checkpoint["cfg"]["lr_scheduler"]
    decay = schedule["decay_fraction"] or 1 - schedule["warmup_fraction"]
    budget, end, peak = outcome["budget_seconds"], outcome["end_learning_rate"], outcome["peak_lr"]
    began = state["trained_seconds"] - outcome["last_update_seconds"]
    spent = (began - state["first_update_seconds"]) / (budget - state["first_update_seconds"])
    return (end + (peak - end) * (1 - spent) / decay) * (1 + 1e-9)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def needs_compiled(name: str):
    """Mark: the test checks compiled loop ``name`` (fconv_plugin/native); skipped where it
    does not run, with the loader's reason (CI's normal build runs them all: fconv-info --check)."""
    import pytest

    from fconv_plugin import backend

    why = backend.reason(name)
    return pytest.mark.skipif(why is not None, reason=f"the compiled {name} does not run here: {why}")
