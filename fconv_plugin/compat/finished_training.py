"""Running ``fairseq-train`` again after it finished changes nothing.

Resuming is done by running the same command again, but fairseq 0.12 compares the
update count with ``--max-update`` only after a training step: a finished run that is
started again trains one more update, saves, and stops (80 → 81 → 82 ...). Here an
epoch that would start at or past ``--max-update`` is not started, so the run stops
at once and every checkpoint stays as it was.
"""

import logging
import math

from ._patching import patch, running_cli_module

logger = logging.getLogger(__name__)


def _stop_when_already_finished(train_one_epoch):
    def train(cfg, trainer, task, epoch_itr):
        max_update = cfg.optimization.max_update or math.inf
        if trainer.get_num_updates() >= max_update:
            logger.info(
                "fconv_plugin: the checkpoint is at update %d, --max-update is %d: nothing to train",
                trainer.get_num_updates(), max_update,
            )
            return [None], True
        return train_one_epoch(cfg, trainer, task, epoch_itr)

    return train


def install() -> None:
    train_cli = running_cli_module("fairseq_cli.train")
    if train_cli is not None:
        patch(train_cli, "train", "finished_training", _stop_when_already_finished)
