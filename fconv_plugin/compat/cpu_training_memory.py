"""fairseq-train on a CPU: the step's large tensors reuse freed memory (``fconv_plugin.host_memory``).

Asked as fairseq's Trainer is built for the plugin's model on the CPU, before the first step,
in a process that runs fairseq-train (its console script, ``python -m fairseq_cli.train``, or
any process that imported ``fairseq_cli.train`` to call its ``main``): a process that builds a
Trainer without it, a model that is not the plugin's, and training on a GPU keep malloc as it is. The log
says what was set. As each later epoch begins, the free pages go back to the kernel, so that
the memory kept is what one epoch's batches need.
"""

import logging

from fairseq import trainer as fairseq_trainer

from .. import host_memory, precision
from ._patching import patch, running_cli_module

logger = logging.getLogger(__name__)


def _keeping_freed_memory(trainer_init):
    def __init__(self, cfg, task, model, criterion, *args, **kwargs):
        if (running_cli_module("fairseq_cli.train") is not None and precision.on_the_cpu(cfg.common.cpu)
                and hasattr(model, "compute_in_")):
            logger.info("fconv_plugin: training on the CPU: %s", host_memory.keep_freed_memory())
            self.fconv_plugin_keeps_freed_memory = host_memory.keeps_freed_memory()  # what took, not what was asked
        trainer_init(self, cfg, task, model, criterion, *args, **kwargs)

    return __init__


def _returning_freed_memory_each_epoch(begin_epoch):
    def begin_epoch_with_free_pages_returned(self, epoch):
        if epoch > 1 and getattr(self, "fconv_plugin_keeps_freed_memory", False):
            host_memory.return_freed_memory()
        return begin_epoch(self, epoch)

    return begin_epoch_with_free_pages_returned


def install() -> None:
    patch(fairseq_trainer.Trainer, "__init__", "cpu_training_memory", _keeping_freed_memory)
    patch(fairseq_trainer.Trainer, "begin_epoch", "cpu_training_memory", _returning_freed_memory_each_epoch)
