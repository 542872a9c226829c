"""fairseq-train --lr-scheduler time_budget --budget-minutes N: real runs on the tiny task.

The first test checks the plan's clock against fairseq's own (the checkpoint's
``previous_training_time``); the bounds are the ones that hold on a loaded machine
(``tests.support.ended_within_its_budget``); the schedule itself is tested under a fake
clock in tests/optim."""

import hashlib
import json
import re
import statistics
import subprocess

import pytest

from fconv_plugin.compat.training_budget import OUTCOME_FILE
from tests.support import annealed_bound, budget_state, checkpoint_updates, ended_within_its_budget, free_port
from tests.tasks import BIN_DIR, PLUGIN_DIR, SMALL_MODEL, run_tool

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools

ADAM = ["--optimizer", "adam", "--lr", "0.003", "--clip-norm", "0.1", "--dropout", "0.1"]


def budget_command(data_bin, save_dir, minutes, *extra):
    return ["fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *ADAM, "--max-tokens", "300",
            "--lr-scheduler", "time_budget", "--budget-minutes", str(minutes), "--save-dir", save_dir,
            "--seed", "1", "--no-progress-bar", "--log-format", "simple", "--log-interval", "10",
            "--no-epoch-checkpoints", *extra]


def within_the_budget(state, outcome, budget):
    """The stop's promise on any machine, from the outcome beside the checkpoints (which the checkpoint's
    plan must agree with): the last update began inside the budget, and the run ended within its bound."""
    began = state["trained_seconds"] - outcome["last_update_seconds"]
    return (outcome["trained_seconds"] == state["trained_seconds"] and outcome["budget_seconds"] == budget
            and began < budget and ended_within_its_budget(outcome))


def _digests(save_dir):
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(save_dir.glob("*.pt"))}


def test_a_budgeted_run_ends_within_its_budget_anneals_and_says_what_it_reached(word_task, tmp_path):
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    budget = 0.25 * 60  # seconds
    # without validation the save follows the stop at once: fairseq's clock at the save is the training's end
    result = run_tool(*budget_command(data_bin, save_dir, 0.25, "--disable-validation"))
    log = result.stdout + result.stderr
    state, fairseq_seconds, checkpoint = budget_state(save_dir / "checkpoint_last.pt")
    updates = checkpoint["optimizer_history"][-1]["num_updates"]
    outcome = json.loads((save_dir / OUTCOME_FILE).read_text())
    assert state["updates"] == updates > 20
    assert 0.9 * budget <= state["trained_seconds"] and within_the_budget(state, outcome, budget)
    # fairseq's own clock in the save: the training's end, and then only the log line and the save itself
    assert state["trained_seconds"] <= fairseq_seconds <= state["trained_seconds"] + outcome["final_validation_and_save_seconds"] + 1.0
    assert state["finished"] is True and state["budget_seconds"] == budget
    spent = re.search(r"fconv_plugin: the budget is spent: (\d+) updates in [0-9.]+ min \(([0-9.]+) s\) of training "
                      r"\(budget 0.25 min \(15.0 s\)\); by updates, --max-update (\d+) reruns it", log)
    assert spent and int(spent.group(1)) == int(spent.group(3)) == updates
    assert float(spent.group(2)) == pytest.approx(state["trained_seconds"], abs=0.05)
    assert re.search(r"fconv_plugin: final validation and save: [0-9.]+ s", log)
    # the learning rate: warmed up, then annealed to its end value by the last update's step
    lrs = [float(x) for x in re.findall(r"train_inner \|.*? lr=([0-9.e-]+),", log)]
    assert max(lrs) > 0.002 and lrs[-1] < lrs[len(lrs) // 2]
    assert checkpoint["last_optimizer_state"]["param_groups"][0]["lr"] == 0.0
    # progress lines give the minutes spent and left
    progress = re.findall(r"spent_min=([0-9.]+), left_min=([0-9.]+)", log)
    assert progress and all(float(s) + float(l) == pytest.approx(0.25, abs=0.011) for s, l in progress)
    # the outcome, for scripts, beside the checkpoints: the checkpoint's own numbers
    assert outcome["stopped_for"] == "time" and outcome["updates"] == updates
    assert outcome["trained_seconds"] == state["trained_seconds"] and outcome["budget_seconds"] == budget
    assert outcome["lr_after_it"] == outcome["end_learning_rate"] == 0.0
    assert 0 < outcome["last_update_lr"] <= annealed_bound(state, outcome, checkpoint)  # the last update itself


def test_validations_inside_the_budget_anneal_to_a_nonzero_end_value_and_end_in_its_last_2_percent(word_task, tmp_path):
    """A validation every 15 updates, inside the budget: the last one that would leave no room for an
    update is left to the final validation, and the learning rate set after the last update is the end value."""
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    budget = 0.25 * 60
    result = run_tool(*budget_command(data_bin, save_dir, 0.25, "--validate-interval-updates", "15",
                                      "--end-learning-rate", "1e-5"))
    log = result.stdout + result.stderr
    state, _, checkpoint = budget_state(save_dir / "checkpoint_last.pt")
    assert checkpoint["last_optimizer_state"]["param_groups"][0]["lr"] == 1e-5
    assert len(re.findall(r"\| valid on 'valid' subset \|", log)) >= 3  # validations inside the budget, and the final one
    assert state["pauses"] >= 2 and state["finished"] is True
    typical = statistics.median(state["intervals"])
    outcome = json.loads((save_dir / OUTCOME_FILE).read_text())
    assert 0.98 * budget - typical <= state["trained_seconds"] and within_the_budget(state, outcome, budget)
    assert outcome["lr_after_it"] == outcome["end_learning_rate"] == 1e-5 and outcome["updates"] == state["updates"]
    assert 1e-5 < outcome["last_update_lr"] <= annealed_bound(state, outcome, checkpoint)


def test_a_resumed_budget_continues_its_clock_and_a_finished_one_trains_nothing(word_task, tmp_path):
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    run_tool(*budget_command(data_bin, save_dir, 0.15))
    first, first_clock, _ = budget_state(save_dir / "checkpoint_last.pt")

    longer = run_tool(*budget_command(data_bin, save_dir, 0.3))
    log = longer.stdout + longer.stderr
    second, second_clock, _ = budget_state(save_dir / "checkpoint_last.pt")
    assert re.search(rf"Loaded checkpoint .*checkpoint_last.pt \(epoch \d+ @ {first['updates']} updates\)", log)
    assert second["updates"] > first["updates"]
    assert first_clock < second["trained_seconds"]  # the clock went on from the first run's
    assert within_the_budget(second, json.loads((save_dir / OUTCOME_FILE).read_text()), 0.3 * 60)
    assert second_clock > first_clock

    finished = _digests(save_dir)
    again = run_tool(*budget_command(data_bin, save_dir, 0.3))
    assert "fconv_plugin: the checkpoint's run has spent the budget of 0.30 min (18.0 s)" in again.stdout + again.stderr
    assert "nothing to train" in again.stdout + again.stderr
    assert _digests(save_dir) == finished
    assert checkpoint_updates(save_dir / "checkpoint_last.pt") == second["updates"]


@pytest.mark.parametrize("minutes", ["0", "-2", "abc", "nan"])
def test_nonsense_budgets_are_refused_in_one_line_before_anything_is_written(word_task, tmp_path, minutes):
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    refused = run_tool(*budget_command(data_bin, save_dir, minutes), check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"fconv_plugin: error: --budget-minutes must be a number of minutes above 0 (e.g. 30 or 2.5), got {minutes!r}")
    assert "Traceback" not in refused.stderr and "usage:" not in refused.stderr
    assert not save_dir.exists()


def test_a_budget_smaller_than_one_update_is_refused_before_a_checkpoint_is_written(word_task, tmp_path):
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    refused = run_tool(*budget_command(data_bin, save_dir, "0.0001"), check=False)
    assert refused.returncode == 1
    last = refused.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"fconv_plugin: error: --budget-minutes 0.0001 \(0.0 s\) is less than one update takes here: "
                        r"the first ended at [0-9.]+ s of training; give more minutes \(no checkpoint was written\)", last)
    assert list(save_dir.glob("*.pt")) == []


def test_options_that_would_stop_a_budget_early_are_refused(word_task, tmp_path):
    _, data_bin = word_task
    refused = run_tool(*budget_command(data_bin, tmp_path / "c", 1, "--stop-min-lr", "1e-5"), check=False)
    assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1].startswith(
        "fconv_plugin: error: --stop-min-lr would stop a --lr-scheduler time_budget run")
    refused = run_tool(*budget_command(data_bin, tmp_path / "c", 1, "--stop-time-hours", "1"), check=False)
    assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1].startswith(
        "fconv_plugin: error: --stop-time-hours would stop a --lr-scheduler time_budget run mid-schedule")
    refused = run_tool(*budget_command(data_bin, tmp_path / "c", 1, "--warmup-fraction", "0.5", "--decay-fraction",
                                       "0.8"), check=False)
    assert refused.returncode == 1 and "must be fractions of the budget" in refused.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "c").exists()


def test_torchrun_workers_stop_at_the_same_update(word_task, tmp_path):
    _, data_bin = word_task
    save_dir = tmp_path / "checkpoints"
    command = budget_command(data_bin, save_dir, 0.3, "--distributed-world-size", "2", "--distributed-backend", "gloo")
    distributed = subprocess.run(
        [str(BIN_DIR / "torchrun"), "--nproc_per_node", "2", "--master_port", str(free_port()),
         str(BIN_DIR / "fairseq-train"), *map(str, command[1:])],
        capture_output=True, text=True, timeout=300,
    )
    log = distributed.stdout + distributed.stderr
    assert distributed.returncode == 0, log[-3000:]
    stop = re.search(r"fconv_plugin: the budget is spent on 2 of 2 workers, at updates \[(\d+), (\d+)\]: (\d+) updates", log)
    assert stop, log[-3000:]
    assert stop.group(1) == stop.group(2) == stop.group(3)
    state, _, _ = budget_state(save_dir / "checkpoint_last.pt")
    assert state["updates"] == int(stop.group(1))
    assert within_the_budget(state, json.loads((save_dir / OUTCOME_FILE).read_text()), 0.3 * 60)
