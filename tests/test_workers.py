"""tests/workers.py in a real pytest-xdist session of two workers: what a session fixture
makes is made once for both, and each worker keeps to its own CPUs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import workers

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = '''
import os, time
import pytest
from tests import workers

workers.keep_to_a_share_of_the_cpus()


def pytest_collection_modifyitems(items):
    workers.files_longest_first(items)


@pytest.fixture(scope="session")
def made(tmp_path_factory):
    def make(directory):
        with open(os.environ["MAKES"], "a") as f:
            f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
        time.sleep(2)  # long enough that the other worker asks meanwhile
        (directory / "model.txt").write_text("trained")
        return directory / "model.txt", "its log"
    return workers.made_once(tmp_path_factory, "made", make)
'''

TEST_FILE = '''
import json, os
import pytest
{mark}
def test_reads_what_was_made(made):
    path, log = made
    assert path.read_text() == "trained" and log == "its log"
    with open(os.environ["SEEN"], "a") as f:
        f.write(json.dumps([os.environ.get("PYTEST_XDIST_WORKER", "none"), sorted(os.sched_getaffinity(0)), str(path),
                            os.path.basename(__file__)]) + "\\n")
'''


def _all_the_machines_cpus():
    """The session under test starts as the suite's own does, on every CPU (this test may run in
    a worker that keeps to its share)."""
    os.sched_setaffinity(0, range(os.cpu_count()))


def _session(tmp_path, *options):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: s\n    long: l\n")
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_a_fast_one.py").write_text(TEST_FILE.format(mark=""))
    (project / "test_b_long_one.py").write_text(TEST_FILE.format(mark="@pytest.mark.slow\n@pytest.mark.long"))
    environment = workers.environment_of_a_new_session()
    environment.update(PYTHONPATH=str(ROOT), MAKES=str(tmp_path / "makes"), SEEN=str(tmp_path / "seen"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(project),
                             *options, str(project)], capture_output=True, text=True, cwd=project, env=environment,
                            timeout=300, preexec_fn=_all_the_machines_cpus)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    seen = [json.loads(line) for line in (tmp_path / "seen").read_text().splitlines()]
    return (tmp_path / "makes").read_text().splitlines(), seen


def test_two_workers_share_one_making_and_keep_to_their_own_cpus(tmp_path):
    makes, seen = _session(tmp_path, "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder")
    assert len(makes) == 1 and makes[0] in ("gw0", "gw1")
    assert sorted(worker for worker, _, _, _ in seen) == ["gw0", "gw1"]  # each file in its own worker
    assert len({path for _, _, path, _ in seen}) == 1  # the same file, made once
    cpus = {worker: set(share) for worker, share, _, _ in seen}
    if os.cpu_count() >= 2:
        assert cpus["gw0"] and cpus["gw1"] and not cpus["gw0"] & cpus["gw1"]
    else:
        pytest.skip("one CPU on this machine: both workers share it")


def test_the_file_of_long_tests_is_handed_out_first(tmp_path):
    """-n 1: one worker runs both files, in the order it was handed them."""
    makes, seen = _session(tmp_path, "-n", "1", "--dist", "loadfile", "--no-loadscope-reorder")
    assert [test_file for _, _, _, test_file in seen] == ["test_b_long_one.py", "test_a_fast_one.py"]
    assert makes == ["gw0"]


def test_without_workers_it_is_made_in_the_session_and_nothing_is_pinned(tmp_path):
    makes, seen = _session(tmp_path, "-n", "0")
    assert makes == ["none"]
    assert [test_file for _, _, _, test_file in seen] == ["test_a_fast_one.py", "test_b_long_one.py"]  # collected so
    assert [(worker, len(cpus)) for worker, cpus, _, _ in seen] == [("none", os.cpu_count())] * 2
