"""The budget's plan under a fake clock: warm-up, decay, the end value, the stop, re-estimation.

At a steady pace the plan must be fairseq's own ``polynomial_decay`` (power 1) over the
updates the budget buys, the reference here; stalls and a slower machine must move the
schedule forward and still end within the budget."""

import math
from argparse import Namespace

import pytest
import torch
from fairseq.optim.sgd import SGD
from fairseq.optim.lr_scheduler.polynomial_decay_schedule import PolynomialDecayLRSchedule

from fconv_plugin.errors import FConvError
from fconv_plugin.optim.budget_plan import BudgetPlan, check_fractions, parse_minutes

PEAK = 0.003


def lr_of(plan: BudgetPlan, end: float = 0.0) -> float:
    """The scheduler's rule (optim/time_budget.py): warm-up from 0, decay from the peak to the end."""
    progress = plan.progress()
    factor = plan.lr_factor(progress)
    return PEAK * factor if plan.in_warmup(progress) else end + (PEAK - end) * factor


def run(plan: BudgetPlan, interval, start_up: float = 5.0, pause_at=None, end: float = 0.0):
    """Train until the plan stops: ``interval(u)`` seconds for update u, ``pause_at``: {u: seconds}
    of validation after update u. Returns {update: lr set after it} and the clock at the end."""
    clock, updates, lrs = 0.0, 0, {}
    plan.record(0, clock)
    lrs[0] = lr_of(plan, end)
    pause_at = pause_at or {}
    while True:
        clock += interval(updates + 1) + (start_up if updates == 0 else 0.0)
        updates += 1
        plan.record(updates, clock)
        lrs[updates] = lr_of(plan, end)
        if plan.out_of_time(pause_now=updates in pause_at):
            plan.finish()
            return lrs, clock
        clock += pause_at.get(updates, 0.0)
        assert updates < 100_000


def polynomial_decay(warmup: int, total: int):
    """fairseq's scheduler itself over fairseq's SGD, stepped as fairseq-train steps it."""
    optimizer = SGD(Namespace(lr=[PEAK], momentum=0.0, weight_decay=0.0), [torch.nn.Parameter(torch.zeros(1))])
    cfg = Namespace(warmup_updates=warmup, force_anneal=None, end_learning_rate=0.0, power=1.0,
                    total_num_update=total, lr=[PEAK])
    return PolynomialDecayLRSchedule(cfg, optimizer)


def test_a_steady_pace_is_fairseqs_polynomial_decay_over_the_updates_the_budget_buys():
    plan = BudgetPlan(seconds=205.0, warmup=0.1)  # 5 s of start-up, then 200 updates of 1 s
    lrs, clock = run(plan, lambda u: 1.0)
    assert max(lrs) == 200 and clock == 205.0
    reference = polynomial_decay(warmup=20, total=200)
    for update in range(2, 201):  # the pace is known from the second update on
        assert lrs[update] == pytest.approx(reference.step_update(update), abs=1e-12), update
    assert lrs[0] == lrs[1] == 0.0  # before the pace is known: the warm-up's start
    assert lrs[200] == 0.0 and lrs[199] > 0  # the last update's step sets the end value


def test_warm_up_hold_and_decay_are_fractions_of_the_run():
    plan = BudgetPlan(seconds=405.0, warmup=0.25, decay=0.5)  # 400 updates: rise 100, hold 100, fall 200
    lrs, _ = run(plan, lambda u: 1.0)
    assert max(lrs) == 400
    assert lrs[50] == pytest.approx(PEAK * 50 / 100)
    assert lrs[100] == lrs[150] == lrs[199] == pytest.approx(PEAK)
    assert lrs[300] == pytest.approx(PEAK * 100 / 200)
    assert lrs[400] == 0.0


def test_the_end_value_is_reached_within_the_last_2_percent_and_training_ends_within_the_budget():
    for seconds, pace in [(60.0, 0.37), (300.0, 0.9), (1800.0, 2.3), (31.0, 1.1)]:
        plan = BudgetPlan(seconds=seconds, warmup=0.1)
        lrs, clock = run(plan, lambda u: pace, end=1e-5)
        assert clock <= seconds
        last = max(lrs)
        assert lrs[last] == pytest.approx(1e-5)  # set after the last update, at clock <= budget
        assert clock >= 0.98 * seconds - pace  # no update that fitted was left out


def test_a_validation_stall_moves_the_schedule_forward_and_the_run_still_ends_in_time():
    steady = BudgetPlan(seconds=205.0)
    steady_lrs, _ = run(steady, lambda u: 1.0)
    stalled = BudgetPlan(seconds=205.0)
    lrs, clock = run(stalled, lambda u: 1.0, pause_at={60: 40.0})
    assert clock <= 205.0
    assert max(lrs) < max(steady_lrs) - 30  # the 40 s of validation cost updates
    assert lrs[61] < steady_lrs[61]  # the schedule jumped forward after the stall
    assert lrs[max(lrs)] == 0.0


def test_a_validation_due_at_the_end_is_counted_before_it_starts():
    plan = BudgetPlan(seconds=205.0)
    pauses = {u: 8.0 for u in range(25, 400, 25)}  # a validation every 25 updates, 8 s each
    lrs, clock = run(plan, lambda u: 1.0, pause_at=pauses)
    assert clock <= 205.0
    # the stop came where the next validation and update would not both fit
    last = max(lrs)
    assert last in pauses or clock + 1.0 > 205.0


def test_a_machine_that_slows_down_does_not_make_the_run_overshoot():
    plan = BudgetPlan(seconds=300.0)
    lrs, clock = run(plan, lambda u: 0.5 if u < 300 else 1.5)
    assert clock <= 300.0 * 1.03
    assert lrs[max(lrs)] == 0.0
    assert plan.typical_interval() == 1.5  # the slower pace became the typical one
    assert plan.pauses == 0


def test_max_updates_ends_the_plan_first():
    plan = BudgetPlan(seconds=1000.0, max_updates=50)
    lrs, clock = run(plan, lambda u: 1.0)
    assert max(lrs) == 50 and clock < 100
    reference = polynomial_decay(warmup=5, total=50)
    for update in range(2, 51):
        assert lrs[update] == pytest.approx(reference.step_update(update), abs=1e-12)


def test_a_resumed_plan_continues_its_clock_and_pace():
    whole = BudgetPlan(seconds=205.0)
    whole_lrs, _ = run(whole, lambda u: 1.0)
    first = BudgetPlan(seconds=205.0)
    clock = 0.0
    first.record(0, clock)
    for update in range(1, 81):
        clock += 1.0 + (5.0 if update == 1 else 0.0)
        first.record(update, clock)
    saved = first.state_dict()
    assert saved["updates"] == 80 and saved["trained_seconds"] == 85.0

    resumed = BudgetPlan(seconds=205.0)
    resumed.load_state_dict(saved)
    assert not resumed.spent_at_checkpoint()
    clock += 3.0  # the save and the restart: a start, not the pace
    resumed.record(80, clock)
    assert lr_of(resumed) == pytest.approx(whole_lrs[80])  # the saved place until the pace is read again
    clock += 1.0
    resumed.record(81, clock)
    assert lr_of(resumed) == pytest.approx(whole_lrs[80], rel=0.05)
    while not resumed.out_of_time():
        clock += 1.0
        resumed.record(resumed.updates + 1, clock)
    assert clock <= 205.0 and resumed.updates == 197  # 3 s of restart cost 3 updates


def test_a_finished_plan_started_again_has_nothing_to_train():
    plan = BudgetPlan(seconds=105.0)
    run(plan, lambda u: 1.0)
    again = BudgetPlan(seconds=105.0)
    again.load_state_dict(plan.state_dict())
    assert again.spent_at_checkpoint()
    longer = BudgetPlan(seconds=200.0)  # a larger budget continues it
    longer.load_state_dict(plan.state_dict())
    assert not longer.spent_at_checkpoint()


def test_a_plan_that_stopped_for_a_validation_is_spent_when_started_again():
    plan = BudgetPlan(seconds=115.0)  # 8 s of validation after every 20 updates
    run(plan, lambda u: 1.0, pause_at={u: 8.0 for u in range(20, 200, 20)})
    assert plan.updates == 80 and plan.update_clock == 109.0  # stopped: update 81 and the validation before it do not fit
    assert plan.update_clock + plan.seconds_per_update() < plan.seconds  # one update alone would still fit
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
