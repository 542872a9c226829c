"""fairseq's ``--bf16`` on CPUs: mixed-precision training, not a TPU.

fairseq 0.12 takes ``--bf16`` (and ``--memory-efficient-bf16``) to mean a TPU: its
options set ``--tpu``, and ``fairseq-train --cpu --bf16`` ends in ``AttributeError:
'NoneType' object has no attribute 'xla_device'``. On a CPU (``--cpu``, or no GPU) the
plugin takes it as the CPU's bfloat16:

- the CPU decides (``fconv_plugin.precision``): one without bfloat16 units is refused in
  one line as the options are read, before anything is written;
- ``fairseq-train`` trains the plugin's model in mixed precision
  (``FConvModel.compute_in_``): products and convolutions in bfloat16; the weights, the
  optimizer's state and so the checkpoints float32, under the names they always have. The
  weights are the optimizer's float32 master copy themselves, so fairseq's FP16Optimizer
  wrapper, which would keep a second one, is not used; ``--memory-efficient-bf16`` trains
  the same way (it keeps no second copy either);
- the commands that decode or score (generate, interactive, validate) run in float32,
  with a note: the compiled float32 step and int8 weights (``fconv-quantize``) are the
  CPU's fast decoding paths; bfloat16 decoding has not been measured to pay there.

A model that is not the plugin's keeps fairseq's own ``--bf16`` path.
"""

import logging
import sys

import torch
from fairseq import trainer as fairseq_trainer
from omegaconf import open_dict

from .. import backend, precision
from ._patching import patch, running_cli_module
from ._workers import from_every_worker

logger = logging.getLogger(__name__)

COMMANDS = ("train", "generate", "interactive", "validate", "eval_lm")
TRAINING = ("train",)


def wants_cpu_bf16(bf16: bool, cpu: bool, tpu_asked: bool) -> bool:
    """``--bf16`` on a CPU: asked for, and neither a GPU in use nor a TPU asked for by name."""
    return bool(bf16) and not tpu_asked and precision.on_the_cpu(cpu)


def _tpu_asked() -> bool:
    return any(arg == "--tpu" for arg in sys.argv)


def _option(args) -> str:
    return "--memory-efficient-bf16" if getattr(args, "memory_efficient_bf16", False) else "--bf16"


def _reading_cpu_bf16(convert, command: str):
    """The conversion of the options in fairseq's ``command``, with ``--bf16`` on a CPU read
    as the CPU's bfloat16: refused here, before anything is written, on a CPU without the
    units. Only the commands' own conversion is wrapped: a checkpoint's saved options, which
    fairseq converts as it loads old checkpoints, are never refused."""

    def convert_namespace_to_omegaconf(args):
        if wants_cpu_bf16(getattr(args, "bf16", False), getattr(args, "cpu", False), _tpu_asked()):
            if command in TRAINING:
                precision.check_cpu_bf16(precision.bf16_units(), _option(args))
                backend.dropout_setting()  # FCONV_DROPOUT refused before anything is written
            else:
                _, note = precision.decoding_precision(_option(args), on_cpu=True, what="this command")
                logger.info(note)
                args.bf16 = args.memory_efficient_bf16 = False
            args.tpu = False  # fairseq's options took --bf16 for a TPU
        return convert(args)

    return convert_namespace_to_omegaconf


def train_in_mixed_precision(cfg, model, units: str) -> None:
    """``--bf16`` for the plugin's ``model`` on a CPU with bfloat16 ``units``: the model
    computes in bfloat16 itself, and fairseq's trainer, told float32, keeps the weights, the
    optimizer and the checkpoints float32 (no model cast, no FP16Optimizer)."""
    model.compute_in_(torch.bfloat16)
    with open_dict(cfg):  # fairseq's options took --bf16 for a TPU
        cfg.common.bf16 = cfg.common.memory_efficient_bf16 = cfg.common.tpu = False
    # each torchrun worker's own model says what it computes in; only the first worker's INFO reaches the log
    workers = from_every_worker(model.decoder.compute_dtype == model.encoder.compute_dtype == torch.bfloat16)
    on_workers = "" if len(workers) == 1 else f" on {sum(workers)} of {len(workers)} workers"
    logger.info("fconv_plugin: --bf16 on the CPU (%s): products and convolutions in bfloat16%s; weights, "
                "optimizer state and checkpoints float32; dropout: %s", units, on_workers,
                model.decoder.dropout_module.draws)


def _training_in_mixed_precision(trainer_init):
    def __init__(self, cfg, task, model, criterion, *args, **kwargs):
        common = cfg.common
        if wants_cpu_bf16(common.bf16, common.cpu, _tpu_asked()) and hasattr(model, "compute_in_"):
            # also where fairseq_cli.train.main(cfg) is called in-process, past the commands' conversion
            train_in_mixed_precision(cfg, model, precision.check_cpu_bf16(precision.bf16_units(), _option(common)))
        trainer_init(self, cfg, task, model, criterion, *args, **kwargs)

    return __init__


def install() -> None:
    for command in COMMANDS:
        module = running_cli_module(f"fairseq_cli.{command}")
        if module is not None and hasattr(module, "convert_namespace_to_omegaconf"):
            patch(module, "convert_namespace_to_omegaconf", "cpu_bf16", _reading_cpu_bf16, command)
    patch(fairseq_trainer.Trainer, "__init__", "cpu_bf16", _training_in_mixed_precision)
