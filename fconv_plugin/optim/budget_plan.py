"""A training budget in wall-clock minutes: the updates it buys and the learning rate over them.

Budgeted training (Li, Yumer and Ramanan, *Budgeted Training*, ICLR 2020): a schedule
that anneals to its end value exactly as the budget runs out beats one planned for
another length, most of all for small budgets, and linear decay is robust. How many
updates a budget buys is not known in advance (the CPU, its load, the pauses for
validation), so after every update one reading of the clock decides (``BudgetPlan.decide``):

    seconds per update = the larger of the mean and the median of the recent training intervals
                         + the pauses so far (validation, saving, a new epoch) spread over the updates so far
    remaining updates  = updates_that_fit(budget - clock - the pause due now, seconds per update)
    progress           = max(updates / (updates + remaining), the budget's time spent since the first update)

The same reading sets the next update's learning rate and says whether that update
happens: when none fits, the progress is 1, so the learning rate set after the last
update is the end value exactly (as fairseq's ``polynomial_decay`` leaves it), and the run
stops. The learning rate rises linearly over the warm-up fraction of the run, holds, then
falls linearly over the decay fraction. At a steady pace the two parts of the progress agree (the
updates' part leads by the start-up); where the intervals vary, as on a loaded machine, the clock's
part can lead, and then bounds the learning rate: no update trains above the value of the budget's
fraction of time left at the reading that lets it happen. A pause due now (a validation, a save) that would
leave no room for one more update, where one more fits without it, is left to the final
validation and save, which come after the stop anyway: the budget is used to its end.
The length of a pause is learnt from those measured; one due in the run's last
``FIRST_PAUSE_NEAR_END`` before any was measured is left to the end too. An interval over
``PAUSE_FACTOR`` times the typical one (their median) is a pause; two such in a row are the machine
slowing down, and join the training intervals. A budget started from a checkpoint of another
schedule counts from that run's first update (its updates and clock are the origin).

Only the clock readings it is given decide, so workers that read the same clock (fairseq's
trainer aggregates it over data-parallel workers) plan the same updates. Nothing here
knows fairseq: ``optim/time_budget.py`` is its scheduler, ``compat/training_budget.py`` its
clock and its stop. ``updates_that_fit`` is also what the examples' recipes call to turn
minutes into updates.
"""

import enum
import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Dict, Optional

from ..errors import FConvError

WINDOW = 9  # recent training intervals whose median is the typical update
PAUSE_FACTOR = 3.0
FIRST_PAUSE_NEAR_END = 0.05  # a pause of a length not yet measured, due in this last fraction of the run, is left to the end


def parse_minutes(text, option: str = "--budget-minutes") -> float:
    """A budget's minutes from what the user wrote: a finite number above 0, else the one-line refusal."""
    try:
        minutes = float(text)
    except (TypeError, ValueError):
        minutes = math.nan
    if not math.isfinite(minutes) or minutes <= 0:
        raise FConvError(f"{option} must be a number of minutes above 0 (e.g. 30 or 2.5), got {str(text)!r}")
    return minutes


def check_fractions(warmup: float, decay: float) -> None:
    """Warm-up and decay are fractions of the run that fit in it together; else the one-line refusal."""
    if not (0 <= warmup < 1) or not (0 < decay <= 1) or warmup + decay > 1 + 1e-9:
        raise FConvError(
            f"--warmup-fraction {warmup} and --decay-fraction {decay} must be fractions of the budget with "
            "0 <= warm-up < 1, 0 < decay <= 1 and warm-up + decay <= 1 (e.g. 0.1 and 0.9)")


def minutes_text(seconds: float) -> str:
    return f"{seconds / 60:.2f} min ({seconds:.1f} s)"


def updates_that_fit(seconds_left: float, seconds_per_update: float, typical_interval: Optional[float] = None,
                     pauses: int = 0, seconds_per_pause: float = 0.0) -> int:
    """How many updates ``seconds_left`` buys at ``seconds_per_update`` (pauses spread in); one more where the
    pauses spread over the run are not all still to come and one typical update still fits. Before a run
    (the examples' speed probe), ``pauses`` validations of ``seconds_per_pause`` each still to come inside
    the budget are taken from it first."""
    seconds_left -= max(pauses, 0) * max(seconds_per_pause, 0.0)
    if seconds_left <= 0 or seconds_per_update <= 0:
        return 0
    fit = math.floor(seconds_left / seconds_per_update)
    if fit == 0 and typical_interval is not None and seconds_left >= typical_interval:
        return 1
    return fit


def learning_rate(progress: float, peak: float, end: float, warmup: float, decay: float) -> float:
    """The learning rate at ``progress`` (0 to 1) of the run: linear warm-up from 0 to ``peak``, hold, then
    linear decay to ``end``, reached at progress 1."""
    if progress < warmup:
        return peak * progress / warmup
    if progress < 1 - decay:
        return peak
    return end + (peak - end) * max(0.0, (1 - progress) / decay)


class Phase(enum.Enum):
    STARTING = "starting"  # the next interval includes a start (a resumed checkpoint's loading): not the pace
    RUNNING = "running"
    FINISHED = "finished"  # no further update fits: the run stops at this update


@dataclass(frozen=True)
class Decision:
    """What one reading of the clock after an update decides."""

    updates: int  # updates done
    clock: float  # the reading, seconds of training
    remaining: Optional[int]  # further updates that fit (None: the pace not yet known)
    progress: float  # the run's fraction done, which sets the next update's learning rate
    pause_left_to_the_end: bool  # a pause due now is left to the final validation and save
    stop: Optional[str]  # None (train on), "time" (no further update fits) or "max_update"


class BudgetPlan:
    """The plan for ``seconds`` of training: after each update, ``decide`` from the clock."""

    def __init__(self, seconds: float, warmup: float = 0.1, decay: Optional[float] = None,
                 max_updates: Optional[int] = None):
        decay = 1 - warmup if decay is None else decay
        check_fractions(warmup, decay)
        self.seconds, self.warmup, self.decay = float(seconds), warmup, decay
        self.max_updates = max_updates or None
        self.phase = Phase.STARTING
        self.updates = 0  # updates done
        self.clock: Optional[float] = None  # the latest reading of the training clock
        self.update_clock: Optional[float] = None  # the reading at the latest new update
        self.last_interval: Optional[float] = None  # seconds from the update before it to the latest
        self.next_update_planned: Optional[float] = None  # the least time the latest go-ahead left the next update
        self.last_update_planned: Optional[float] = None  # the same, for the latest update, as it was decided
        self.first_update_clock: Optional[float] = None
        self.intervals = deque(maxlen=WINDOW)  # recent training intervals, seconds
        self.timed_updates = 0  # updates whose interval was measured
        self.pause_seconds = 0.0  # beyond the typical interval, summed
        self.pauses = 0
        self.suspect: Optional[float] = None  # the last interval, when it looked like a pause
        self.progress = 0.0  # the latest decision's place in the run (a resumed plan's saved one until the pace is read)
        self.stopped_for: Optional[str] = None  # the decision's stop: "time" or "max_update"
        self.saved_finished_within: Optional[float] = None  # a loaded plan that ran out of time: its budget's seconds
        # where this budget began: 0 and 0, or a checkpoint of another schedule's updates and clock
        self.origin_updates, self.origin_clock = 0, 0.0

    @property
    def finished(self) -> bool:
        return self.phase is Phase.FINISHED

    # --- the clock ---

    def record(self, updates: int, clock: float) -> None:
        """The training clock (seconds, counting from the budget's start) after ``updates`` updates."""
        self.clock = clock
        if updates == self.updates + 1 and self.update_clock is not None:
            if self.phase is Phase.STARTING:
                self.phase = Phase.RUNNING  # a start's interval (data loading, a resume) says nothing of the pace
            else:
                self._measure(clock - self.update_clock)
        if self.update_clock is None:  # the first reading: the interval to the next one is the pace
            self.phase = Phase.RUNNING
            if updates > 1:  # a checkpoint of another schedule: the budget counts from this run's first update
                self.origin_updates, self.origin_clock = updates - 1, clock
        if updates != self.updates or self.update_clock is None:
            if updates == self.updates + 1 and self.update_clock is not None:
                self.last_interval = clock - self.update_clock
                self.last_update_planned = self.next_update_planned
            self.updates, self.update_clock = updates, clock
            if updates >= 1 and self.first_update_clock is None:
                self.first_update_clock = clock

    def _measure(self, interval: float) -> None:
        self.timed_updates += 1
        typical = self.typical_interval()
        if typical is None or interval <= PAUSE_FACTOR * typical:
            self.intervals.append(interval)
            self.suspect = None
        elif self.suspect is not None:  # two long ones in a row: the machine is slower now
            self.pause_seconds -= self.suspect - typical
            self.pauses -= 1
            self.intervals.pop()  # the typical one that stood in for the first
            self.intervals.extend((self.suspect, interval))
            self.suspect = None
        else:
            self.pause_seconds += interval - typical
            self.pauses += 1
            self.intervals.append(typical)
            self.suspect = interval

    def typical_interval(self) -> Optional[float]:
        return statistics.median(self.intervals) if self.intervals else None

    def seconds_per_update(self) -> Optional[float]:
        """The recent training intervals' mean (what a number of updates adds up to, where the intervals vary),
        or their median where that is larger (a few short ones, an epoch's last batches, do not make room),
        plus the pauses so far spread over the updates measured."""
        if not self.intervals:
            return None
        pace = max(statistics.fmean(self.intervals), statistics.median(self.intervals))
        return pace + self.pause_seconds / max(self.timed_updates, 1)

    def expected_pause(self) -> float:
        """A validation's pause as measured so far (0 before the first)."""
        return self.pause_seconds / self.pauses if self.pauses else 0.0

    # --- the decision ---

    def remaining_updates(self, pause_now: bool = False) -> Optional[int]:
        """Updates that still fit (None before the pace is known); ``pause_now``: a pause comes first."""
        if self.finished:
            return 0
        per_update = self.seconds_per_update()
        if per_update is None or self.clock is None:
            return None
        left = self.seconds - (self.clock - self.origin_clock) - (self.expected_pause() if pause_now else 0.0)
        remaining = updates_that_fit(left, per_update, self.typical_interval())
        if self.max_updates is not None:
            remaining = min(remaining, max(self.max_updates - self.updates, 0))
        return remaining

    def decide(self, updates: int, clock: float, pause_due: bool = False, pause_can_wait: bool = True) -> Decision:
        """One reading of the clock after ``updates`` updates, with a pause (validation, save) due now or not:
        the next update's progress (its learning rate) and whether it happens, from the same numbers.
        ``pause_can_wait``: False where the pause due cannot be left to the end (the run's last epoch ends here)."""
        if self.finished:
            return Decision(self.updates, self.clock or clock, 0, 1.0, False, "time")
        self.record(updates, clock)
        remaining = self.remaining_updates()
        done = self.updates - self.origin_updates
        left_to_the_end = False
        if pause_due and remaining:
            with_pause = self.remaining_updates(pause_now=True)
            unmeasured_near_end = self.pauses == 0 and remaining <= FIRST_PAUSE_NEAR_END * (done + remaining)
            left_to_the_end = pause_can_wait and (with_pause == 0 or unmeasured_near_end)
            remaining = remaining if left_to_the_end else with_pause
        if remaining is None:  # the pace is not known yet: the saved (or starting) place, unless the clock is out
            stop = "time" if clock - self.origin_clock >= self.seconds else None
            progress = 1.0 if stop else self.progress
        else:
            at_max = self.max_updates is not None and self.updates >= self.max_updates
            stop = ("max_update" if at_max else "time") if remaining == 0 else None
            progress = 1.0 if remaining == 0 else min(max(done / (done + remaining), self.time_progress()), 1.0)
            if remaining:  # the go-ahead gave the next update at least this much of the time left
                self.next_update_planned = min(self.seconds_per_update(), self.typical_interval())
        if stop:
            self.phase, self.stopped_for = Phase.FINISHED, stop
        self.progress = progress
        return Decision(self.updates, clock, remaining, progress, left_to_the_end, stop)

    def time_progress(self) -> float:
        """The budget's fraction spent at the latest reading, counted from the first update's end (the
        start-up before it is not the schedule's)."""
        if self.clock is None or self.first_update_clock is None:
            return 0.0
        scheduled = self.seconds - (self.first_update_clock - self.origin_clock)
        return 1.0 if scheduled <= 0 else max(self.clock - self.first_update_clock, 0.0) / scheduled

    def check_first_update(self) -> None:
        """Refuse a budget that the first update alone overran, before anything is saved."""
        if self.first_update_clock is not None and self.first_update_clock > self.seconds and self.updates == 1 \
                and self.origin_updates == 0:
            raise FConvError(
                f"--budget-minutes {self.seconds / 60:g} ({self.seconds:.1f} s) is less than one update takes here: "
                f"the first ended at {self.first_update_clock:.1f} s of training; give more minutes (no checkpoint was written)")

    def spent_seconds(self) -> float:
        """Seconds of this budget spent at the latest update."""
        return 0.0 if self.update_clock is None else self.update_clock - self.origin_clock

    def mean_update_seconds(self) -> Optional[float]:
        """The updates' own pace over this budget: seconds from its first update to its latest, the
        pauses apart, per update (what a speed probe's seconds per update foretell; the start-up before
        the first update is left out, a resumed run's restart is in); None before a second update."""
        timed = self.updates - self.origin_updates - 1
        if timed < 1 or self.update_clock is None or self.first_update_clock is None:
            return None
        return (self.update_clock - self.first_update_clock - self.pause_seconds) / timed

    def summary(self) -> str:
        spent = self.spent_seconds()
        return f"{self.updates} updates in {minutes_text(spent)} of training (budget {minutes_text(self.seconds)})"

    # --- checkpoints ---

    def state_dict(self) -> Dict:
        return {
            "budget_seconds": self.seconds, "updates": self.updates, "trained_seconds": self.update_clock,
            "intervals": list(self.intervals), "timed_updates": self.timed_updates,
            "pause_seconds": self.pause_seconds, "pauses": self.pauses, "progress": self.progress,
            "first_update_seconds": self.first_update_clock, "finished": self.finished,
            "stopped_for": self.stopped_for, "origin_updates": self.origin_updates, "origin_seconds": self.origin_clock,
        }

    def load_state_dict(self, state: Dict) -> None:
        """Continue a saved plan: its pace and pauses; the next interval is a start again."""
        self.updates = int(state["updates"])
        self.update_clock = state["trained_seconds"]
        self.intervals.clear()
        self.intervals.extend(state["intervals"])
        self.timed_updates = int(state["timed_updates"])
        self.pause_seconds, self.pauses = float(state["pause_seconds"]), int(state["pauses"])
        self.first_update_clock = state["first_update_seconds"]
        self.progress = float(state["progress"])
        self.phase, self.suspect = Phase.STARTING, None
        stopped_for = state.get("stopped_for", "time" if state.get("finished") else None)  # older plans: time
        self.saved_finished_within = float(state["budget_seconds"]) if stopped_for == "time" else None
        self.origin_updates, self.origin_clock = int(state.get("origin_updates", 0)), float(state.get("origin_seconds", 0.0))

    def spent_at_checkpoint(self) -> bool:
        """The saved plan's last update left no room for another under this budget (a finished run
        started again): read from the checkpoint's numbers, the same on every worker."""
        if self.phase is not Phase.STARTING or self.update_clock is None or self.updates == 0:
            return False
        if self.saved_finished_within is not None and self.seconds <= self.saved_finished_within:
            return True  # it stopped for want of time within a budget no smaller
        per_update = self.seconds_per_update()
        return self.spent_seconds() + (per_update or 0.0) > self.seconds or (
            self.max_updates is not None and self.updates >= self.max_updates)
