"""``--lr-scheduler time_budget`` inside fairseq-train: its clock, its refusals and its stop.

fairseq 0.12 gives a scheduler the update count only, and stops training on
``--max-update`` or ``--stop-time-hours`` (after the deadline has passed, the schedule still
planned for ``--max-update``). For the plugin's budget (``optim/time_budget.py``):

- the options are checked as they are read, before anything is written: a budget that is
  not a number of minutes above 0, fractions that do not fit, ``--stop-min-lr`` (it would
  end the warm-up's first update);
- before each of the scheduler's steps the trainer hands it its clock,
  ``Trainer.cumulative_training_time`` (what checkpoints keep, so a resumed run continues
  it; under torchrun the workers' mean, so every worker plans the same update);
- after each update, when the plan has no room for another (counting the validation
  fairseq is about to run), ``--max-update`` is set to this update, so fairseq stops the
  way it always does: it validates and saves once more, outside the budget, timed and
  said apart; a first update that alone overran the budget is refused before that save;
- a finished budgeted run started again trains nothing.
"""

import logging
import time

from fairseq import trainer as fairseq_trainer
from omegaconf import open_dict

from ..errors import FConvError
from ..optim.budget_plan import check_fractions, minutes_text, parse_minutes
from ..optim.time_budget import NAME, TimeBudgetSchedule
from ._patching import patch, running_cli_module
from ._workers import from_every_worker

logger = logging.getLogger(__name__)


def check_options(args) -> None:
    """The budget's options as fairseq-train read them; one-line refusals (FConvError)."""
    if getattr(args, "lr_scheduler", None) != NAME:
        return
    parse_minutes(getattr(args, "budget_minutes", None))
    warmup = getattr(args, "warmup_fraction", 0.1)
    decay = getattr(args, "decay_fraction", None)
    check_fractions(warmup, 1 - warmup if decay is None else decay)
    if getattr(args, "stop_min_lr", -1.0) >= 0:
        raise FConvError("--stop-min-lr would stop a --lr-scheduler time_budget run as it starts (its warm-up "
                         "begins at 0) or as it ends; leave it out, the budget stops the run")


def _checking_options(convert):
    def convert_namespace_to_omegaconf(args):
        check_options(args)
        return convert(args)

    return convert_namespace_to_omegaconf


def _plan_of(trainer):
    scheduler = trainer.lr_scheduler
    return scheduler.plan if isinstance(scheduler, TimeBudgetSchedule) else None


def _stepping_on_the_trainers_clock(lr_step_update):
    def lr_step_update_on_the_clock(self):
        scheduler = self.lr_scheduler
        if isinstance(scheduler, TimeBudgetSchedule):
            scheduler.read_clock(self.cumulative_training_time())
        return lr_step_update(self)

    return lr_step_update_on_the_clock


def validates_now(cfg, num_updates: int, epoch: int, end_of_epoch: bool) -> bool:
    """Whether fairseq's ``validate_and_save`` validates after this update (its own rule, short of a stop)."""
    dataset, checkpoint = cfg.dataset, cfg.checkpoint
    if dataset.disable_validation or num_updates < dataset.validate_after_updates:
        return False
    saves_now = checkpoint.save_interval_updates > 0 and num_updates % checkpoint.save_interval_updates == 0
    return ((end_of_epoch and epoch % dataset.validate_interval == 0) or (not end_of_epoch and saves_now)
            or (dataset.validate_interval_updates > 0 and num_updates % dataset.validate_interval_updates == 0))


def _stopping_when_the_budget_is_spent(validate_and_save):
    def validate_and_save_on_budget(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
        plan = _plan_of(trainer)
        updates = trainer.get_num_updates()
        if plan is None or plan.finished or (plan.max_updates is not None and updates >= plan.max_updates):
            return validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        plan.record(updates, trainer.cumulative_training_time())
        plan.check_first_update()
        if not plan.out_of_time(pause_now=validates_now(cfg, updates, epoch_itr.epoch, end_of_epoch)):
            return validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        plan.finish()
        stops = from_every_worker(updates)  # under torchrun, said once: only the first worker's INFO is logged
        workers = "" if len(stops) == 1 else f" on {len(stops)} of {len(stops)} workers, at updates {stops}"
        logger.info("fconv_plugin: the budget is spent%s: %s; by updates, --max-update %d reruns it; "
                    "the final validation and save follow, outside the budget", workers, plan.summary(), updates)
        with open_dict(cfg):
            cfg.optimization.max_update = updates  # fairseq's own stop: validate, save, end
        started = time.time()
        result = validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        logger.info("fconv_plugin: final validation and save: %.1f s", time.time() - started)
        return result

    return validate_and_save_on_budget


def _not_training_a_spent_budget(train_one_epoch):
    def train(cfg, trainer, task, epoch_itr):
        plan = _plan_of(trainer)
        if plan is not None and plan.spent_at_checkpoint():
            logger.info("fconv_plugin: the checkpoint's run has spent the budget of %s (%s): nothing to train",
                        minutes_text(plan.seconds), plan.summary())
            return [None], True
        return train_one_epoch(cfg, trainer, task, epoch_itr)

    return train


def install() -> None:
    patch(fairseq_trainer.Trainer, "lr_step_update", "training_budget", _stepping_on_the_trainers_clock)
    train_cli = running_cli_module("fairseq_cli.train")
    if train_cli is not None:
        patch(train_cli, "convert_namespace_to_omegaconf", "training_budget", _checking_options)
        patch(train_cli, "validate_and_save", "training_budget", _stopping_when_the_budget_is_spent)
        patch(train_cli, "train", "training_budget", _not_training_a_spent_budget)
