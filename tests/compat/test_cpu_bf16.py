"""fairseq's --bf16 on CPUs (compat/cpu_bf16.py): mixed precision through fairseq's own
trainer, float32 checkpoints under fconv's names, and a one-line refusal on a CPU without
bfloat16 units, before anything is written.

fairseq's real Trainer runs here on any CPU, with the units passed in
(``train_in_mixed_precision``): torch computes bfloat16 everywhere, only slowly without
them. The commands themselves take the CPU as it is: the refusal is tested where it has no
units, training with --bf16 where it has them (each skips with its reason elsewhere)."""

import itertools

import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import fconv as reference_fconv
from fairseq.optim import FP16Optimizer, MemoryEfficientFP16Optimizer
from fairseq.trainer import Trainer

from fconv_plugin import precision
from fconv_plugin.compat.cpu_bf16 import train_in_mixed_precision, wants_cpu_bf16
from tests.support import checkpoint_updates, load_raw_checkpoint
from tests.tasks import PLUGIN_DIR, SMALL_MODEL, run_tool

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools

UNITS = precision.bf16_units()
needs_units = pytest.mark.skipif(UNITS is None, reason="this CPU has no bfloat16 units (AMX-BF16 or AVX-512 BF16)")
lacks_units = pytest.mark.skipif(UNITS is not None, reason=f"this CPU has bfloat16 units ({UNITS}): nothing to refuse")
TRAIN = [*SMALL_MODEL, "--optimizer", "adam", "--lr", "0.003", "--max-tokens", "300", "--dropout", "0", "--seed", "1",
         "--required-batch-size-multiple", "1", "--no-progress-bar", "--log-format", "simple", "--log-interval", "1"]


def test_bf16_means_the_cpu_unless_a_gpu_is_in_use_or_a_tpu_asked_for():
    assert wants_cpu_bf16(bf16=True, cpu=True, tpu_asked=False)
    assert not wants_cpu_bf16(bf16=True, cpu=True, tpu_asked=True)
    assert not wants_cpu_bf16(bf16=False, cpu=True, tpu_asked=False)
    assert wants_cpu_bf16(bf16=True, cpu=False, tpu_asked=False) == (not torch.cuda.is_available())


def _trainer(data_bin, save_dir, seed=1):
    """fairseq's Trainer as fairseq-train builds it (``--cpu``), the model in mixed precision
    as ``--bf16`` on a CPU with units makes it."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(data_bin), "--user-dir", PLUGIN_DIR, *TRAIN, "--cpu",
                                                "--save-dir", str(save_dir)])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    torch.manual_seed(seed)
    model = task.build_model(cfg.model)
    train_in_mixed_precision(cfg, model, "AVX-512 BF16")
    trainer = Trainer(cfg, task, model, task.build_criterion(cfg.criterion))
    return cfg, task, trainer


def _batches(trainer, count):
    epoch = trainer.get_train_iterator(epoch=1, load_dataset=False)
    return list(itertools.islice(epoch.next_epoch_itr(shuffle=False), count))


def _train(trainer, batches):
    return [trainer.train_step([batch])["loss"] for batch in batches]


def test_fairseqs_trainer_keeps_float32_weights_and_checkpoints_and_a_resumed_run_goes_on_exactly(word_task, tmp_path):
    _, data_bin = word_task
    cfg, task, straight = _trainer(data_bin, tmp_path / "straight")
    assert straight.model.decoder.compute_dtype == torch.bfloat16 and not cfg.common.bf16
    assert not isinstance(straight.optimizer, (FP16Optimizer, MemoryEfficientFP16Optimizer))  # the weights are the master copy
    batches = _batches(straight, 10)
    losses = _train(straight, batches)
    assert {p.dtype for p in straight.model.parameters()} == {torch.float32}
    assert sum(losses[-3:]) < sum(losses[:3])

    _, _, first = _trainer(data_bin, tmp_path / "resumed")
    assert _train(first, batches[:5]) == losses[:5]  # the same run up to the save
    checkpoint = tmp_path / "checkpoint_last.pt"
    first.consolidate_optimizer()  # as fairseq-train saves (checkpoint_utils.save_checkpoint)
    first.save_checkpoint(str(checkpoint), {})
    saved = load_raw_checkpoint(checkpoint)["model"]
    reference = reference_fconv.FConvModel.build_model(cfg.model, task)
    assert sorted(saved) == sorted(reference.state_dict())  # fairseq's fconv's names
    assert {value.dtype for value in saved.values()} == {torch.float32}
    reference.load_state_dict(saved)  # and it loads there as it is

    _, _, resumed = _trainer(data_bin, tmp_path / "resumed", seed=2)  # other initial weights, then the checkpoint's
    resumed.load_checkpoint(str(checkpoint))
    assert resumed.get_num_updates() == 5 and resumed.model.decoder.compute_dtype == torch.bfloat16
    assert _train(resumed, batches[5:]) == pytest.approx(losses[5:], rel=1e-6)


@lacks_units
@pytest.mark.parametrize("option", ["--bf16", "--memory-efficient-bf16"])
def test_bf16_on_a_cpu_without_units_is_refused_in_one_line_before_anything_is_written(word_task, tmp_path, option):
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    refused = run_tool("fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *TRAIN, "--cpu", option,
                       "--max-update", "2", "--save-dir", save_dir, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"fconv_plugin: error: {option} on the CPU needs bfloat16 units (AMX-BF16 or AVX-512 BF16) and this CPU has "
        f"none (bfloat16 would run many times slower than float32 here); drop {option} to run in float32")
    assert "Traceback" not in refused.stderr and "xla_device" not in refused.stderr
    assert not save_dir.exists()


@lacks_units
def test_decoding_with_bf16_on_a_cpu_without_units_is_refused_too(trained_model):
    data_bin, save_dir, _ = trained_model
    refused = run_tool("fairseq-generate", data_bin, "--user-dir", PLUGIN_DIR, "--path", save_dir / "checkpoint_best.pt",
                       "--cpu", "--bf16", "--beam", "2", check=False)
    assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1].startswith(
        "fconv_plugin: error: --bf16 on the CPU needs bfloat16 units")


@needs_units
def test_fairseq_train_with_bf16_on_this_cpu_trains_in_mixed_precision_and_resumes(word_task, tmp_path):
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    command = ["fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *TRAIN, "--cpu", "--bf16", "--save-dir", save_dir]
    first = run_tool(*command, "--max-update", "8")
    log = first.stdout + first.stderr
    assert f"fconv_plugin: --bf16 on the CPU ({UNITS}): products and convolutions in bfloat16" in log
    saved = load_raw_checkpoint(save_dir / "checkpoint_last.pt")["model"]
    assert {value.dtype for value in saved.values()} == {torch.float32}
    run_tool(*command, "--max-update", "12")
    assert checkpoint_updates(save_dir / "checkpoint_last.pt") == 12


@needs_units
def test_decoding_with_bf16_on_this_cpu_runs_in_float32_with_a_note(trained_model):
    data_bin, save_dir, _ = trained_model
    generate = ["fairseq-generate", data_bin, "--user-dir", PLUGIN_DIR, "--path", save_dir / "checkpoint_best.pt",
                "--cpu", "--beam", "2"]
    plain, bf16 = run_tool(*generate), run_tool(*generate, "--bf16")
    assert f"--bf16 on the CPU ({UNITS}) is for training; this command runs in float32" in bf16.stderr
    assert [line for line in bf16.stdout.splitlines() if line.startswith("H-")] == \
        [line for line in plain.stdout.splitlines() if line.startswith("H-")]
