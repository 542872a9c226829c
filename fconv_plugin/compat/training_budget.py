"""``--lr-scheduler time_budget`` inside fairseq-train: its clock, its refusals and its stop.

fairseq 0.12 gives a scheduler the update count only, and stops training on
``--max-update`` or ``--stop-time-hours`` (after the deadline has passed, the schedule still
planned for ``--max-update``). For the plugin's budget (``optim/time_budget.py``):

- the options are checked as they are read, before anything is written: a budget that is
  not a number of minutes above 0, fractions that do not fit, ``--stop-min-lr`` (it would
  end the warm-up's first update);
- after each update, as fairseq is about to validate and save, the trainer's clock is read
  once, ``Trainer.cumulative_training_time`` (what checkpoints keep, so a resumed run
  continues it; under torchrun the workers' mean, so every worker decides the same), with
  whether a validation or save is due (fairseq's own rules), and the scheduler's
  ``after_update`` sets the next update's learning rate from it and says whether that
  update happens;
- when none does, ``--max-update`` is set to this update, so fairseq stops the way it
  always does: it validates and saves once more, outside the budget, timed and said apart;
  a first update that alone overran the budget is refused before that save; a validation
  and save due when only an update without them still fits are left to those final ones;
- the budget's outcome (``OUTCOME_FILE`` in the save directory: updates, seconds, the last
  learning rate, why it stopped) is written once the final save is done, for scripts to read;
- a finished budgeted run started again trains nothing.
"""

import json
import logging
import os
import tempfile
import time

from fairseq.distributed import utils as distributed_utils
from omegaconf import open_dict

from ..errors import FConvError
from ..optim.budget_plan import check_fractions, minutes_text, parse_minutes
from ..optim.time_budget import NAME, TimeBudgetSchedule
from ._patching import patch, running_cli_module
from ._workers import from_every_worker

logger = logging.getLogger(__name__)

OUTCOME_FILE = "time_budget.json"


def check_options(args) -> None:
    """The budget's options as fairseq-train read them; one-line refusals (FConvError)."""
    if getattr(args, "lr_scheduler", None) != NAME:
        return
    parse_minutes(getattr(args, "budget_minutes", None))
    warmup = getattr(args, "warmup_fraction", 0.1)
    decay = getattr(args, "decay_fraction", None)
    check_fractions(warmup, 1 - warmup if decay is None else decay)
    if getattr(args, "stop_time_hours", 0) > 0:
        raise FConvError("--stop-time-hours would stop a --lr-scheduler time_budget run mid-schedule; give the time "
                         "as --budget-minutes alone (the learning rate then anneals to its end as it runs out)")
    if getattr(args, "stop_min_lr", -1.0) >= 0:
        raise FConvError("--stop-min-lr would stop a --lr-scheduler time_budget run as it starts (its warm-up "
                         "begins at 0) or as it ends; leave it out, the budget stops the run")


def _checking_options(convert):
    def convert_namespace_to_omegaconf(args):
        check_options(args)
        return convert(args)

    return convert_namespace_to_omegaconf


def _budget_of(trainer):
    scheduler = trainer.lr_scheduler
    return scheduler if isinstance(scheduler, TimeBudgetSchedule) else None


def _plan_of(trainer):
    scheduler = _budget_of(trainer)
    return None if scheduler is None else scheduler.plan


def pause_due(cfg, num_updates: int, epoch: int, end_of_epoch: bool) -> bool:
    """Whether fairseq's ``validate_and_save`` validates or saves after this update (its own rules, short of
    a stop): the pause the budget's decision counts."""
    dataset, checkpoint = cfg.dataset, cfg.checkpoint
    saves = (end_of_epoch and epoch % checkpoint.save_interval == 0) or (
        checkpoint.save_interval_updates > 0 and num_updates > 0 and num_updates % checkpoint.save_interval_updates == 0
        and num_updates >= dataset.validate_after_updates)
    validates = (
        ((not end_of_epoch and saves) or (end_of_epoch and epoch % dataset.validate_interval == 0)
         or (dataset.validate_interval_updates > 0 and num_updates > 0
             and num_updates % dataset.validate_interval_updates == 0))
        and not dataset.disable_validation and num_updates >= dataset.validate_after_updates)
    return validates or (saves and not checkpoint.no_save)


def _stopping_when_the_budget_is_spent(validate_and_save):
    def validate_and_save_on_budget(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
        scheduler = _budget_of(trainer)
        if scheduler is None or scheduler.plan.finished:
            return validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        updates = trainer.get_num_updates()
        last_epoch = end_of_epoch and 0 < cfg.optimization.max_epoch < epoch_itr.next_epoch_idx  # fairseq's loop ends here
        decision = scheduler.after_update(updates, float(trainer.cumulative_training_time()),  # a tensor under torchrun
                                          pause_due(cfg, updates, epoch_itr.epoch, end_of_epoch), not last_epoch)
        plan = scheduler.plan
        plan.check_first_update()
        if decision.stop is None and decision.pause_left_to_the_end:
            logger.info("fconv_plugin: the validation and save due after update %d are left to the final ones: "
                        "with them no further update would fit, without them one does", updates)
            return [None], False
        if decision.stop is None:
            return validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        if decision.stop == "time":
            stops = from_every_worker(updates)  # under torchrun, said once: only the first worker's INFO is logged
            workers = "" if len(stops) == 1 else f" on {len(stops)} of {len(stops)} workers, at updates {stops}"
            logger.info("fconv_plugin: the budget is spent%s: %s; by updates, --max-update %d reruns it; "
                        "the final validation and save follow, outside the budget", workers, plan.summary(), updates)
            with open_dict(cfg):
                cfg.optimization.max_update = updates  # fairseq's own stop: validate, save, end
        started = time.time()
        result = validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        final_seconds = time.time() - started
        logger.info("fconv_plugin: final validation and save: %.1f s", final_seconds)
        if distributed_utils.is_master(cfg.distributed_training) and not cfg.checkpoint.no_save:
            try:
                write_outcome(cfg.checkpoint.save_dir, scheduler.outcome(decision, final_seconds))
            except OSError as error:  # the checkpoints are saved: say it, and end as fairseq does
                logger.warning("fconv_plugin: could not write %s in %s (%s); the checkpoint's scheduler state "
                               "holds the same numbers", OUTCOME_FILE, cfg.checkpoint.save_dir, error)
        return result

    return validate_and_save_on_budget


def write_outcome(save_dir: str, outcome: dict) -> None:
    """``OUTCOME_FILE`` in ``save_dir``, replaced whole (a reader never sees half of it)."""
    os.makedirs(save_dir, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=".time_budget.", dir=save_dir)
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(outcome, file, indent=1)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(scratch, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0600
        os.replace(scratch, os.path.join(save_dir, OUTCOME_FILE))
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


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
    train_cli = running_cli_module("fairseq_cli.train")
    if train_cli is not None:
        patch(train_cli, "convert_namespace_to_omegaconf", "training_budget", _checking_options)
        patch(train_cli, "validate_and_save", "training_budget", _stopping_when_the_budget_is_spent)
        patch(train_cli, "train", "training_budget", _not_training_a_spent_budget)
