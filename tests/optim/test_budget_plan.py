"""The budget's plan under a fake clock: warm-up, decay, the end value, the stop, re-estimation.

At a steady pace the plan must be fairseq's own ``polynomial_decay`` (power 1) over the
updates the budget buys, the reference here; stalls and a slower machine must move the
schedule forward and still end within the budget."""

import math
import random
from argparse import Namespace

import pytest
import torch
from fairseq.optim.sgd import SGD
from fairseq.optim.lr_scheduler.polynomial_decay_schedule import PolynomialDecayLRSchedule

from fconv_plugin.errors import FConvError
from fconv_plugin.optim.budget_plan import BudgetPlan, check_fractions, parse_minutes, updates_that_fit
from fconv_plugin.optim.time_budget import TimeBudgetConfig, TimeBudgetSchedule

PEAK = 0.003


def schedule_of(seconds: float, warmup: float = 0.1, decay=None, end: float = 0.0, max_updates: int = 0):
    """fairseq's scheduler of the plugin over fairseq's SGD, as fairseq-train builds it."""
    optimizer = SGD(Namespace(lr=[PEAK], momentum=0.0, weight_decay=0.0), [torch.nn.Parameter(torch.zeros(1))])
    cfg = TimeBudgetConfig(budget_minutes=str(seconds / 60), warmup_fraction=warmup, decay_fraction=decay,
                           end_learning_rate=end, max_update=max_updates, lr=[PEAK])
    schedule = TimeBudgetSchedule(cfg, optimizer)
    schedule.plan.seconds = float(seconds)  # exact seconds, not seconds / 60 * 60
    return schedule


def run(schedule: TimeBudgetSchedule, interval, start_up: float = 5.0, pause_at=None, between=None, readings=None):
    """Train until the schedule stops, calling it as fairseq-train does: ``step_update(u)`` inside the
    update's train_step, then ``after_update(u, clock, pause_due)`` as validate_and_save begins,
    ``between(u)`` seconds later (the log, the stats: longer on a loaded machine). ``interval(u)``:
    seconds of update u; ``pause_at``: {u: seconds} of validation after update u, unless left to the end.
    ``readings``, where given, gets {update: the clock its decision read}.
    Returns {update: lr set after it} and the clock at the stop."""
    clock, updates, lrs = 0.0, 0, {}
    optimizer = schedule.optimizer
    schedule.step_update(0)
    lrs[0] = optimizer.get_lr()
    pause_at = pause_at or {}
    while True:
        clock += interval(updates + 1) + (start_up if updates == 0 else 0.0)
        updates += 1
        schedule.step_update(updates)
        clock += between(updates) if between else 0.0
        decision = schedule.after_update(updates, clock, pause_due=updates in pause_at)
        lrs[updates] = optimizer.get_lr()
        if readings is not None:
            readings[updates] = clock
        if decision.stop:
            return lrs, clock
        if not decision.pause_left_to_the_end:
            clock += pause_at.get(updates, 0.0)
        assert updates < 100_000


def polynomial_decay(warmup: int, total: int):
    """fairseq's scheduler itself over fairseq's SGD, stepped as fairseq-train steps it."""
    optimizer = SGD(Namespace(lr=[PEAK], momentum=0.0, weight_decay=0.0), [torch.nn.Parameter(torch.zeros(1))])
    cfg = Namespace(warmup_updates=warmup, force_anneal=None, end_learning_rate=0.0, power=1.0,
                    total_num_update=total, lr=[PEAK])
    return PolynomialDecayLRSchedule(cfg, optimizer)


def test_a_steady_pace_is_fairseqs_polynomial_decay_over_the_updates_the_budget_buys():
    schedule = schedule_of(205.0, warmup=0.1)  # 5 s of start-up, then 200 updates of 1 s
    lrs, clock = run(schedule, lambda u: 1.0)
    assert max(lrs) == 200 and clock == 205.0
    reference = polynomial_decay(warmup=20, total=200)
    for update in range(2, 201):  # the pace is known from the second update on
        assert lrs[update] == pytest.approx(reference.step_update(update), abs=1e-12), update
    assert lrs[0] == lrs[1] == 0.0  # before the pace is known: the warm-up's start
    assert lrs[200] == 0.0 and lrs[199] > 0  # the last update's step sets the end value


def test_warm_up_hold_and_decay_are_fractions_of_the_run():
    schedule = schedule_of(405.0, warmup=0.25, decay=0.5)  # 400 updates: rise 100, hold 100, fall 200
    lrs, _ = run(schedule, lambda u: 1.0)
    assert max(lrs) == 400
    assert lrs[50] == pytest.approx(PEAK * 50 / 100)
    assert lrs[100] == lrs[150] == lrs[199] == pytest.approx(PEAK)
    assert lrs[300] == pytest.approx(PEAK * 100 / 200)
    assert lrs[400] == 0.0


@pytest.mark.parametrize("end", [0.0, 1e-5, 2.5e-4])
def test_the_end_value_is_set_exactly_within_the_last_2_percent_and_training_ends_within_the_budget(end):
    for seconds, pace in [(60.0, 0.37), (300.0, 0.9), (1800.0, 2.3), (31.0, 1.1)]:
        schedule = schedule_of(seconds, warmup=0.1, end=end)
        lrs, clock = run(schedule, lambda u: pace)
        assert clock <= seconds
        last = max(lrs)
        assert lrs[last] == end  # set after the last update, exactly: the scheduler's own arithmetic
        assert end < lrs[last - 1] < lrs[last // 2]
        assert lrs[last - 1] <= end + 2 * (PEAK - end) / (0.9 * last)  # what the last update trained with: one step above
        assert clock >= 0.98 * seconds - pace  # no update that fitted was left out


def test_the_lr_and_the_stop_come_from_one_reading_of_the_clock_however_late_it_is():
    """The race of a loaded machine: the log and the stats after an update take from nothing to twice an
    update, so the clock read as fairseq validates is later than at the update's own lr step."""
    for seed, (seconds, pace) in enumerate([(15.0, 0.01), (60.0, 0.05), (300.0, 0.9)]):
        jitter = random.Random(seed)
        for end in (0.0, 1e-5):
            schedule = schedule_of(seconds, end=end)
            lrs, clock = run(schedule, lambda u: pace * jitter.uniform(0.8, 1.2),
                             between=lambda u: jitter.choice([0.0, 0.0, 0.0, pace * jitter.uniform(0, 2)]))
            assert lrs[max(lrs)] == end, (seconds, end)
            assert clock <= 1.03 * seconds  # an update longer than the ones before may cross the end


def linear_decay_at(fraction_spent: float, end: float = 0.0, decay: float = 0.9) -> float:
    """The decay's learning rate where ``fraction_spent`` of the run is done: the paper's linear schedule."""
    return end + (PEAK - end) * min(1.0, (1 - fraction_spent) / decay)


@pytest.mark.parametrize("end", [0.0, 1e-5])
def test_on_a_loaded_machine_no_update_trains_above_the_budget_fraction_left_as_it_begins(end):
    """A loaded machine's intervals vary and are skewed (most at the pace, every third 2.8 times it, under
    what counts as a pause): the median of the intervals under-states what updates add up to, so a plan by
    updates alone lags the clock and its last updates train above the fraction of the budget left. Every
    update after the warm-up trains at most at the decay's value for the time left as it began."""
    for seconds, pace in [(15.0, 0.03), (300.0, 0.5)]:
        schedule, readings = schedule_of(seconds, end=end), {}
        lrs, clock = run(schedule, lambda u: pace * (2.8 if u % 3 == 0 else 1.0), readings=readings)
        first, last = readings[1], max(lrs)
        for update in range(2, last + 1):  # update u trains with the lr set after u - 1
            spent = (readings[update - 1] - first) / (seconds - first)
            if spent > 0.1:
                assert lrs[update - 1] <= linear_decay_at(spent, end) + 1e-12, (seconds, update)
        assert lrs[last] == end and end < lrs[last - 1] <= linear_decay_at(0.98, end)
        assert readings[last - 1] < seconds and 0.97 * seconds <= clock <= 1.03 * seconds
        plan = schedule.plan  # the last update had at least the time the go-ahead planned for it
        assert seconds - readings[last - 1] >= plan.last_update_planned and plan.last_interval == clock - readings[last - 1]


def test_a_machine_slowing_down_near_the_end_still_anneals_the_updates_it_trains():
    """Ten times slower for the run's last few seconds: the last update began late, and trained low."""
    schedule, readings = schedule_of(300.0), {}
    lrs, clock = run(schedule, lambda u: 0.5 if u < 560 else 5.0, readings=readings)
    last = max(lrs)
    assert lrs[last] == 0.0 and readings[last - 1] < 300.0
    assert lrs[last - 1] <= linear_decay_at((readings[last - 1] - readings[1]) / (300.0 - readings[1])) + 1e-12
    assert clock <= 300.0 + 5.0  # the update under way is not cut: at most its own length past the budget
    plan = schedule.plan
    assert clock - 300.0 <= plan.last_interval - plan.last_update_planned + 1e-9  # past the budget: only beyond the plan


def test_a_validation_stall_moves_the_schedule_forward_and_the_run_still_ends_in_time():
    steady_lrs, _ = run(schedule_of(205.0), lambda u: 1.0)
    lrs, clock = run(schedule_of(205.0), lambda u: 1.0, pause_at={60: 40.0})
    assert clock <= 205.0
    assert max(lrs) < max(steady_lrs) - 30  # the 40 s of validation cost updates
    assert lrs[61] < steady_lrs[61]  # the schedule jumped forward after the stall
    assert lrs[max(lrs)] == 0.0


def test_validations_inside_the_budget_end_at_the_end_value_within_the_last_2_percent():
    """8 s of validation every 20 updates of 1 s in 115 s: after update 80 (109 s) the validation and
    one more update do not both fit, one update does. The validation is left to the final one (it
    follows the stop anyway), so the budget is used to its end and annealed to its end value."""
    for end in (0.0, 1e-5):
        schedule = schedule_of(115.0, end=end)
        lrs, clock = run(schedule, lambda u: 1.0, pause_at={u: 8.0 for u in range(20, 200, 20)})
        last = max(lrs)
        assert lrs[last] == end and lrs[last - 1] <= end + 2 * (PEAK - end) / (0.9 * last)  # annealed, not stopped mid-way
        assert 0.98 * 115.0 <= clock <= 115.0
        assert last > 80 and schedule.plan.pauses == 3
    schedule = schedule_of(205.0)  # a validation every 25 updates, 8 s each
    lrs, clock = run(schedule, lambda u: 1.0, pause_at={u: 8.0 for u in range(25, 400, 25)})
    assert 0.98 * 205.0 - 1.0 <= clock <= 205.0 and lrs[max(lrs)] == 0.0


def test_the_runs_own_seconds_per_update_leave_out_the_start_up_and_the_pauses():
    """What the examples print beside the probe's figure, with 8 s validations after updates 20, 40 and 60
    and a 5 s start-up: 1 s updates train at 1 s each. Where the updates alternate 1 and 2 s, the mean of
    their own intervals, but for the update inside each pause, which counts at the typical length (the
    plan cannot tell the update's part of that interval from the pause's)."""
    pauses = {20: 8.0, 40: 8.0, 60: 8.0}
    schedule = schedule_of(300.0)
    assert schedule.plan.mean_update_seconds() is None  # no update yet
    run(schedule, lambda u: 1.0, pause_at=pauses)
    assert schedule.plan.pauses == 3 and schedule.plan.mean_update_seconds() == pytest.approx(1.0, rel=1e-9)

    def interval(u):
        return 1.0 if u % 2 else 2.0

    schedule = schedule_of(300.0)
    lrs, _ = run(schedule, interval, pause_at=pauses)
    last = max(lrs)
    expected = sum(interval(u) for u in range(2, last + 1)) / (last - 1)  # update 1's interval holds the start-up
    assert schedule.plan.pauses == 3
    assert abs(schedule.plan.mean_update_seconds() - expected) <= 3 * (2.0 - 1.0) / (last - 1) + 1e-9
    assert schedule.outcome(schedule.plan.decide(last, schedule.plan.clock), 0.0)["mean_update_seconds"] == \
        schedule.plan.mean_update_seconds()


def test_a_first_pause_near_the_end_whose_length_is_not_known_yet_is_left_to_the_end():
    schedule = schedule_of(115.0)  # 110 updates fit; a 30 s validation after update 107, the first of the run
    lrs, clock = run(schedule, lambda u: 1.0, pause_at={107: 30.0})
    assert clock <= 115.0 and lrs[max(lrs)] == 0.0
    assert schedule.plan.pauses == 0  # it never ran
    early = schedule_of(115.0)  # the same 30 s at update 50 runs, and costs updates
    lrs, clock = run(early, lambda u: 1.0, pause_at={50: 30.0})
    assert early.plan.pauses == 1 and max(lrs) < 85 and clock <= 115.0


def test_a_checkpoint_of_another_schedule_starts_the_budget_and_its_warm_up_at_its_own_update():
    schedule = schedule_of(100.0)  # resumed at update 500, after 900 s of training by another schedule
    lrs = {}
    clock = 900.0
    for update in range(501, 10_000):
        clock += 1.0 + (5.0 if update == 501 else 0.0)
        schedule.step_update(update)
        lrs[update] = schedule.optimizer.get_lr()  # what this update trained with
        if schedule.after_update(update, clock).stop:
            break
    assert update - 501 == 100 and clock - 906.0 <= 100.0  # 100 s counted from the run's first update (906 s)
    assert lrs[502] == 0.0 and lrs[504] <= PEAK * 3 / (0.1 * 100)  # warming up from 0 again, not from the old run's place
    assert schedule.optimizer.get_lr() == 0.0
    assert schedule.plan.state_dict()["origin_updates"] == 500


def test_a_run_stopped_by_max_update_continues_with_a_larger_one():
    schedule = schedule_of(1000.0, max_updates=50)
    run(schedule, lambda u: 1.0)
    assert schedule.plan.stopped_for == "max_update"
    larger = BudgetPlan(seconds=1000.0, max_updates=80)
    larger.load_state_dict(schedule.plan.state_dict())
    assert not larger.spent_at_checkpoint()
    same = BudgetPlan(seconds=1000.0, max_updates=50)
    same.load_state_dict(schedule.plan.state_dict())
    assert same.spent_at_checkpoint()


def test_resuming_a_checkpoint_of_update_1_is_a_load_not_an_update():
    first = schedule_of(100.0)
    first.step_update(0)
    first.step_update(1)
    first.after_update(1, 6.0)
    resumed = schedule_of(100.0)
    resumed.step_update(0)  # fairseq builds the scheduler, then loads the checkpoint and sets its updates
    resumed.load_state_dict({"best": None, "budget": first.plan.state_dict()})
    resumed.step_update(1)
    resumed.step_update(2)  # the first update of the resumed run: not refused
    assert not resumed.after_update(2, 8.0).stop


def test_a_machine_that_slows_down_does_not_make_the_run_overshoot():
    schedule = schedule_of(300.0)
    lrs, clock = run(schedule, lambda u: 0.5 if u < 300 else 1.5)
    assert clock <= 300.0 * 1.03
    assert lrs[max(lrs)] == 0.0
    assert schedule.plan.typical_interval() == 1.5  # the slower pace became the typical one
    assert schedule.plan.pauses == 0


def test_max_updates_ends_the_plan_first():
    schedule = schedule_of(1000.0, max_updates=50)
    lrs, clock = run(schedule, lambda u: 1.0)
    assert max(lrs) == 50 and clock < 100
    reference = polynomial_decay(warmup=5, total=50)
    for update in range(2, 51):
        assert lrs[update] == pytest.approx(reference.step_update(update), abs=1e-12)


def test_updates_that_fit():
    assert updates_that_fit(100.0, 1.0) == 100
    assert updates_that_fit(100.0, 3.0) == 33
    assert updates_that_fit(0.0, 1.0) == updates_that_fit(-5.0, 1.0) == 0
    assert updates_that_fit(1.2, 1.5) == 0
    assert updates_that_fit(1.2, 1.5, typical_interval=1.0) == 1  # the pauses spread in are not all to come
    # pauses still to come (the examples' probe, before a run) are taken first: 290 s less 3 of 5 s, at 0.6 s
    assert updates_that_fit(290.0, 0.6, pauses=3, seconds_per_pause=5.0) == 458  # 275 / 0.6 = 458.3
    assert updates_that_fit(290.0, 0.6, pauses=0, seconds_per_pause=5.0) == 483
    assert updates_that_fit(10.0, 1.0, pauses=2, seconds_per_pause=5.0) == 0


def test_a_scheduler_that_fairseq_train_does_not_drive_is_refused():
    schedule = schedule_of(100.0)
    schedule.step_update(0)
    schedule.step_update(1)
    with pytest.raises(FConvError, match="runs in fairseq-train with --user-dir fconv_plugin"):
        schedule.step_update(2)  # two updates and no decision between them


def _plan_after(updates: int, seconds: float, pace: float = 1.0, start_up: float = 5.0):
    plan, clock = BudgetPlan(seconds=seconds), 0.0
    for update in range(1, updates + 1):
        clock += pace + (start_up if update == 1 else 0.0)
        plan.decide(update, clock)
    return plan, clock


def test_a_resumed_plan_continues_its_clock_and_pace():
    whole_lrs, _ = run(schedule_of(205.0), lambda u: 1.0)
    first, clock = _plan_after(80, 205.0)
    saved = first.state_dict()
    assert saved["updates"] == 80 and saved["trained_seconds"] == 85.0

    resumed = schedule_of(205.0)
    resumed.load_state_dict({"best": None, "budget": saved})
    assert not resumed.plan.spent_at_checkpoint()
    clock += 3.0  # the save and the restart: a start, not the pace
    resumed.after_update(80, clock)
    assert resumed.optimizer.get_lr() == pytest.approx(whole_lrs[80], rel=0.03)  # the 3 s lost (1.5% of it) move it a little
    updates = 80
    while not resumed.after_update(updates, clock).stop:
        clock, updates = clock + 1.0, updates + 1
    assert clock <= 205.0 and resumed.plan.updates == updates == 197  # 3 s of restart cost 3 updates
    assert resumed.optimizer.get_lr() == 0.0
    assert resumed.plan.timed_updates == saved["timed_updates"] + 116  # the restart's interval was not the pace


def test_a_finished_plan_started_again_has_nothing_to_train():
    schedule = schedule_of(105.0)
    run(schedule, lambda u: 1.0)
    again = BudgetPlan(seconds=105.0)
    again.load_state_dict(schedule.plan.state_dict())
    assert again.spent_at_checkpoint()
    longer = BudgetPlan(seconds=200.0)  # a larger budget continues it
    longer.load_state_dict(schedule.plan.state_dict())
    assert not longer.spent_at_checkpoint()


def test_a_plan_that_stopped_with_time_left_is_spent_when_started_again():
    schedule = schedule_of(115.0)  # a last update of 1.5 s did not fit in the 1.4 s left
    run(schedule, lambda u: 1.0 if u < 60 else 1.5, start_up=0.0)
    plan = schedule.plan
    assert plan.finished and plan.update_clock < plan.seconds
    again = BudgetPlan(seconds=115.0)
    again.load_state_dict(plan.state_dict())
    assert again.spent_at_checkpoint()  # the same budget: nothing more to train
    longer = BudgetPlan(seconds=130.0)
    longer.load_state_dict(plan.state_dict())
    assert not longer.spent_at_checkpoint()


def test_a_budget_the_first_update_overran_is_refused():
    plan = BudgetPlan(seconds=3.0)
    plan.record(0, 0.0)
    plan.record(1, 4.2)
    with pytest.raises(FConvError, match=r"^--budget-minutes 0.05 \(3.0 s\) is less than one update takes here: "
                                         r"the first ended at 4.2 s of training; give more minutes"):
        plan.check_first_update()
    fits = BudgetPlan(seconds=30.0)
    fits.record(0, 0.0)
    fits.record(1, 4.2)
    fits.check_first_update()


@pytest.mark.parametrize("text", ["0", "-5", "abc", "", "nan", "inf", "-inf", None, "1e400"])
def test_nonsense_budgets_are_refused_in_one_line(text):
    with pytest.raises(FConvError) as refused:
        parse_minutes(text)
    message = str(refused.value)
    assert "\n" not in message
    assert message == f"--budget-minutes must be a number of minutes above 0 (e.g. 30 or 2.5), got {str(text)!r}"


@pytest.mark.parametrize("text,minutes", [("30", 30.0), ("2.5", 2.5), (" 1 ", 1.0), ("1e-3", 0.001)])
def test_budgets_are_read_as_minutes(text, minutes):
    assert parse_minutes(text) == minutes


@pytest.mark.parametrize("warmup,decay", [(-0.1, 0.5), (1.0, 0.5), (0.5, 0.0), (0.5, 0.6), (0.1, 1.2), (math.nan, 0.5)])
def test_fractions_that_do_not_fit_are_refused(warmup, decay):
    with pytest.raises(FConvError, match="must be fractions of the budget"):
        check_fractions(warmup, decay)


def test_a_pause_that_cannot_wait_is_counted_in_the_decision():
    """At the run's last epoch fairseq's loop ends after the pause: it is taken, so the decision counts it."""
    plan, clock = _plan_after(80, 115.0)
    plan.pauses, plan.pause_seconds = 3, 24.0  # three 8 s validations measured so far
    clock += 24.0  # 109 s: a validation and one more update do not fit, one update alone does
    waits = BudgetPlan(seconds=115.0)
    waits.load_state_dict(plan.state_dict())
    assert waits.decide(80, clock, pause_due=True).pause_left_to_the_end
    taken = BudgetPlan(seconds=115.0)
    taken.load_state_dict(plan.state_dict())
    decision = taken.decide(80, clock, pause_due=True, pause_can_wait=False)
    assert not decision.pause_left_to_the_end and decision.stop == "time" and decision.progress == 1.0
