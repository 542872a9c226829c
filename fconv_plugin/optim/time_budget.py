"""``--lr-scheduler time_budget``: fairseq's scheduler for a training budget in minutes.

    fairseq-train ... --user-dir fconv_plugin --lr-scheduler time_budget --budget-minutes 30 \\
        --warmup-fraction 0.1 --decay-fraction 0.9 --end-learning-rate 0

After every update one reading of the trainer's clock (fairseq's cumulative training time,
which checkpoints keep and data-parallel workers share) decides, through the plan
(``budget_plan.BudgetPlan.decide``), both the next update's learning rate and whether it
happens: training stops when no further update fits, with the end value set; the final
validation and save come after and are reported apart (``compat/training_budget.py`` gives
the clock, the pause due, and makes the stop). ``--max-update`` still applies: whichever ends first. The plan's numbers
(updates reached, seconds spent, the pace) are the scheduler's state in every checkpoint.
"""

from dataclasses import dataclass, field
from typing import List, Optional

from fairseq import metrics
from fairseq.dataclass import FairseqDataclass
from fairseq.optim.lr_scheduler import LR_SCHEDULER_REGISTRY, FairseqLRScheduler, register_lr_scheduler
from omegaconf import II

from ..errors import FConvError
from .budget_plan import BudgetPlan, Decision, learning_rate, parse_minutes

NAME = "time_budget"


@dataclass
class TimeBudgetConfig(FairseqDataclass):
    budget_minutes: Optional[str] = field(
        default=None, metadata={"help": "minutes of training (the clock fairseq keeps in checkpoints); the final "
                                        "validation and save come after"})
    warmup_fraction: float = field(
        default=0.1, metadata={"help": "the learning rate rises linearly from 0 over this fraction of the budget"})
    decay_fraction: Optional[float] = field(
        default=None, metadata={"help": "then falls linearly to --end-learning-rate over this last fraction of "
                                        "the budget (default: all after the warm-up)"})
    end_learning_rate: float = field(default=0.0, metadata={"help": "the learning rate the last update's step sets"})
    max_update: int = II("optimization.max_update")
    lr: List[float] = II("optimization.lr")


class TimeBudgetSchedule(FairseqLRScheduler):
    """Warm-up, hold and linear decay stretched over the updates a wall-clock budget buys."""

    def __init__(self, cfg: TimeBudgetConfig, optimizer):
        super().__init__(cfg, optimizer)
        if cfg.budget_minutes is None:
            raise FConvError("--lr-scheduler time_budget needs --budget-minutes (e.g. --budget-minutes 30)")
        if len(cfg.lr) > 1:
            raise FConvError("--lr-scheduler time_budget takes one --lr, its peak")
        self.peak, self.end = cfg.lr[0], cfg.end_learning_rate
        self.plan = BudgetPlan(parse_minutes(cfg.budget_minutes) * 60, cfg.warmup_fraction, cfg.decay_fraction,
                               cfg.max_update)
        self._last_stepped: Optional[int] = None  # the update count of fairseq's latest step_update
        self._undecided = 0  # new updates stepped since the latest decision
        self.pauses_left_to_the_end = 0  # validations and saves left to the final ones
        self.last_update_lr: Optional[float] = None  # the learning rate the latest decided update trained with
        self.optimizer.set_lr(0.0)

    def learning_rate(self, progress: float) -> float:
        return learning_rate(progress, self.peak, self.end, self.plan.warmup, self.plan.decay)

    def after_update(self, num_updates: int, clock: float, pause_due: bool = False,
                     pause_can_wait: bool = True) -> Decision:
        """The one reading of the trainer's clock after an update (compat/training_budget.py gives it, with
        whether a validation or save is due): sets the next update's learning rate, the end value where
        none follows, and says whether it happens."""
        self.last_update_lr = self.optimizer.get_lr()
        decision = self.plan.decide(num_updates, clock, pause_due, pause_can_wait)
        self.optimizer.set_lr(self.learning_rate(decision.progress))
        if decision.stop is None and decision.pause_left_to_the_end:
            self.pauses_left_to_the_end += 1
        self._undecided = 0
        return decision

    def step_update(self, num_updates):
        """fairseq's step after each update: the learning rate stays the one the latest decision set (this
        update trained with it); the minutes spent and left go to fairseq's log."""
        if self._last_stepped is not None and num_updates == self._last_stepped + 1:  # a new update (not a load)
            self._undecided += 1
            if self._undecided > 1:
                raise FConvError("--lr-scheduler time_budget runs in fairseq-train with --user-dir fconv_plugin "
                                 "(its host fixes give it the trainer's clock after each update)")
        self._last_stepped = num_updates
        spent = self.plan.clock or 0.0
        metrics.log_scalar("spent_min", spent / 60, weight=0, priority=310, round=2)
        metrics.log_scalar("left_min", max(self.plan.seconds - spent, 0.0) / 60, weight=0, priority=320, round=2)
        return self.optimizer.get_lr()

    def outcome(self, decision: Decision, final_seconds: float) -> dict:
        """What the budget reached, as scripts read it (compat/training_budget.py writes it beside the checkpoints)."""
        plan = self.plan
        return {
            "stopped_for": decision.stop, "updates": plan.updates - plan.origin_updates,
            "trained_seconds": plan.spent_seconds(), "budget_seconds": plan.seconds,
            "last_update_lr": self.last_update_lr, "lr_after_it": self.optimizer.get_lr(),
            "peak_lr": self.peak, "end_learning_rate": self.end,
            "pauses": plan.pauses, "pause_seconds": plan.pause_seconds, "mean_update_seconds": plan.mean_update_seconds(),
            "pauses_left_to_the_end": self.pauses_left_to_the_end, "typical_update_seconds": plan.typical_interval(),
            "last_update_seconds": plan.last_interval, "last_update_planned_seconds": plan.last_update_planned,
            "final_validation_and_save_seconds": final_seconds,
        }

    def step(self, epoch, val_loss=None):
        super().step(epoch, val_loss)
        return self.optimizer.get_lr()

    def state_dict(self):
        return {**super().state_dict(), "budget": self.plan.state_dict()}

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._last_stepped, self._undecided = None, 0  # fairseq's set_num_updates follows: a load, not an update
        if "budget" in state_dict:  # else a checkpoint of another schedule: the plan starts at its update
            self.plan.load_state_dict(state_dict["budget"])


if NAME not in LR_SCHEDULER_REGISTRY:  # the package imported again in one process
    register_lr_scheduler(NAME, dataclass=TimeBudgetConfig)(TimeBudgetSchedule)
