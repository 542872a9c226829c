"""examples/lib/jobs.sh: a failed background job stops the example script at that step."""

import re
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "examples" / "lib" / "jobs.sh"
SCRIPTS = ["examples/bible_es_en/quickstart.sh", "examples/translate_your_data/train.sh",
           "examples/summarise_debian/summarise.sh"]


def _run(tmp_path, body):
    script = tmp_path / "demo.sh"
    script.write_text(
        "set -euo pipefail\n"
        'fail() { echo "demo: error: $*" >&2; exit 1; }\n'
        f'source "{JOBS}"\n' + body
    )
    started = time.monotonic()
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    return result, time.monotonic() - started


def test_the_first_failed_job_stops_the_script_with_one_line_naming_step_and_log(tmp_path):
    result, seconds = _run(tmp_path, (
        "printf 'a\\nb\\n' > ok.txt 2> ok.log &\n"
        'track "copying ok" ok.log\n'
        "sh -c 'echo half > partial.txt; echo broken pipe >&2; exit 3' 2> bpe.log &\n"
        'track "apply-bpe on train.desc" bpe.log\n'
        "sleep 30 &\n"
        'track "a slow job" slow.log\n'
        "wait_tracked\n"
        "echo next step > after.txt\n"
    ))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["demo: error: apply-bpe on train.desc failed (exit 3); see bpe.log"]
    assert not (tmp_path / "after.txt").exists()  # the script stopped there
    assert seconds < 20  # the slow job was stopped, not waited for
    assert (tmp_path / "bpe.log").read_text() == "broken pipe\n"


def test_jobs_that_all_succeed_let_the_script_go_on(tmp_path):
    result, _ = _run(tmp_path, (
        "for n in 1 2 3; do\n"
        "    sh -c \"sleep 0.$n; echo $n\" > out.$n 2> log.$n &\n"
        '    track "job $n" log.$n\n'
        "done\n"
        "wait_tracked\n"
        "cat out.1 out.2 out.3\n"
        "false &\n"
        'track "a second round" second.log\n'
        "wait_tracked\n"
    ))
    assert result.stdout.split() == ["1", "2", "3"]  # the first round passed and was forgotten
    assert result.returncode == 1 and "a second round failed (exit 1)" in result.stderr


def test_every_example_waits_for_its_jobs_through_the_helper():
    for script in SCRIPTS:
        text = (REPO / script).read_text()
        assert re.search(r"^\s*wait\s*$", text, re.M) is None, script  # no bare wait left
        background = len(re.findall(r"&\s*$", text, re.M))
        assert background and background == text.count("\n        track "), script
        assert 'source "$repo/examples/lib/example.sh"' in text and "wait_tracked" in text, script  # jobs.sh through it
