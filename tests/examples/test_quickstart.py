"""The quickstart bounded by minutes (MINUTES=): what it says first, while and last; a quick
run on 2,000 verses, not evaluated (the quickstart by updates runs in benchmarks/harness.quick_run)."""

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from fconv_plugin import host_memory, precision
from tests import warm_commands
from fconv_plugin.compat.training_budget import OUTCOME_FILE
from tests.support import ended_within_its_budget, load_raw_checkpoint

pytestmark = pytest.mark.slow  # trains a model / runs fairseq's tools

# what fconv_plugin's outcome file says, as examples/lib/budget.sh prints it, with the probe's expectation
BUDGET_SPENT = (r"  budget spent: (\d+) updates in [\d.]+ of [\d.]+ minutes \(no further update fitted\), the last at "
                r"learning rate [\d.e-]+ \(([\d.]+)% of the peak\), annealed to 0; the speed probe expected \d+: [+-][\d.]+%"
                r" \(the run's updates took ([\d.]+) s each(?:, the probe's ([\d.]+))?; its \d+ pause\(s\) [\d.]+ s\)"
                r"(; \d+ validation\(s\) near the end left to the final one)?")
QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "bible_es_en" / "quickstart.sh"


def _run(work, **knobs):
    env = {"PATH": f"{warm_commands.bin_dir()}:/usr/bin:/bin", "VENV": str(warm_commands.venv_dir()), "TRAIN": "2000",
           "VALID": "40", "TEST": "40", "EVALUATE": "0", "WORK_DIR": str(work), **knobs}
    return subprocess.run(["bash", QUICKSTART], env=env, capture_output=True, text=True, timeout=900)


def test_minutes_name_the_budget_and_end_with_the_updates_that_rerun_them(tmp_path):
    chosen = "bf16" if precision.bf16_units() else "fp32"
    # 1.2 minutes: the probe (a few updates, one validation and its save) took 20 s of them beside one CPU-bound
    # process, 55 s beside four, on 2 cores
    result = _run(tmp_path / "run", MINUTES="1.2", VALIDATIONS="2")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"budget: 1.2 minutes of training on this CPU, the speed probe's included; precision: {chosen} (")
    assert lines[1].startswith("recipe: fconv_iwslt_de_en, adam: Adam, lr 0.003 warmed up over the first sixth")
    # fairseq-train started with tcmalloc where it is installed (.ci/run installs it), and says so in its log
    tcmalloc = host_memory.tcmalloc_installed()
    assert lines[0].endswith(f"; memory: tcmalloc ({tcmalloc}, preloaded for fairseq-train)" if tcmalloc else
                             "; memory: glibc's, freed memory kept (tcmalloc, faster, is not installed: libtcmalloc-minimal4)")
    assert (f"training on the CPU: {host_memory.SERVED}" in (tmp_path / "run" / "train.log").read_text()) == bool(tcmalloc)
    probed = [re.fullmatch(r"  the speed probe: ([\d.]+) s per update here and ([\d.]+) s per validation and save, in "
                           r"[\d.]+ s; ([\d.]+) minutes left buy ~(\d+) updates and 1 validation\(s\) before the last", line)
              for line in lines]
    probed = [m for m in probed if m]
    assert len(probed) == 1, result.stdout[-3000:]
    per_update, per_pause, minutes, expected = (float(x) for x in probed[0].groups())
    # VALIDATIONS=2: one pause inside the budget, its timed seconds taken from the minutes before they buy updates
    assert per_pause > 0 and expected == max(1, math.floor((minutes * 60 - per_pause) / per_update))
    progress = [line for line in lines if "num_updates=" in line]
    assert progress and all(re.search(r"spent_min=[\d.]+, left_min=[\d.]+", line) for line in progress)
    match = re.fullmatch(rf"trained in {chosen} for (\d+) updates in ([\d.]+) minutes \(UPDATES=(\d+) reruns them anywhere\) "
                         r"\(EVALUATE=0: not evaluated\): .*checkpoint_best.pt", lines[-1])
    assert match and match.group(1) == match.group(3), lines[-1]
    spent = [re.fullmatch(BUDGET_SPENT, line) for line in lines]
    spent = [m for m in spent if m]
    assert len(spent) == 1 and spent[0].group(1) == match.group(1), result.stdout[-2000:]
    budget = load_raw_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint_last.pt")["optimizer_history"][-1][
        "lr_scheduler_state"]["budget"]
    assert budget["updates"] == int(match.group(1))
    outcome = json.loads((tmp_path / "run" / "checkpoints" / OUTCOME_FILE).read_text())
    assert outcome["trained_seconds"] == budget["trained_seconds"] and outcome["updates"] == budget["updates"]
    assert ended_within_its_budget(outcome), outcome  # the budget + 3%, or the last update's overrun of its plan
    # where a gap from the probe's expectation comes from: the run's pace (its pauses apart) beside the probe's
    pace, probed = spent[0].group(3), spent[0].group(4)
    assert probed is not None and float(probed) == float((tmp_path / "run" / "probe.tsv").read_text().split("\t")[1])
    assert pace == f"{outcome['mean_update_seconds']:.4f}"


@pytest.mark.parametrize("knobs,message", [
    ({"MINUTES": "abc"}, "MINUTES must be a number of minutes above 0 (e.g. 30 or 2.5), got 'abc'"),
    ({"MINUTES": "0"}, "MINUTES must be a number of minutes above 0 (e.g. 30 or 2.5), got '0'"),
    ({"MINUTES": "5", "RECIPE": "nag"}, "MINUTES needs RECIPE=adam (RECIPE=nag shrinks its learning rate on plateaus, "
                                        "not by the clock)"),
    ({"VALIDATIONS": "00"}, "VALIDATIONS must be a whole number from 1 to 999999, got '00'"),
    ({"VALIDATIONS": "1234567"}, "VALIDATIONS must be a whole number from 1 to 999999, got '1234567'"),
    ({"FCONV_ALLOCATOR": "bogus"}, "FCONV_ALLOCATOR must be one of auto, tcmalloc, reuse, system, got 'bogus'; "
                                   "unset it to let training reuse freed memory"),
])
def test_nonsense_minutes_are_refused_in_one_line_before_anything_is_written(tmp_path, knobs, message):
    result = _run(tmp_path / "run", **knobs)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == f"quickstart: error: {message}"
    assert not (tmp_path / "run").exists()


def test_minutes_that_the_validations_use_up_are_refused_in_one_line(tmp_path):
    # 99,999 validations inside 1.2 minutes leave fewer updates than them on any CPU (a pause of 1 ms would)
    result = _run(tmp_path / "run", MINUTES="1.2", VALIDATIONS="100000", TRAIN="300")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.fullmatch(r"quickstart: error: MINUTES=1\.2 buys ~\d+ update\(s\) here beside 99999 validation\(s\) of [\d.]+ s "
                        r"each; give more minutes or fewer VALIDATIONS", result.stderr.strip().splitlines()[-1]), result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()  # refused before fairseq-train
