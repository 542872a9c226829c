"""How the suite shares the machine among pytest-xdist's workers (``-n``, set in pytest.ini):

- ``keep_to_a_share_of_the_cpus()``: each worker runs on its own share of the CPUs, so torch
  in the worker and in every command it starts uses that many threads (torch counts the
  CPUs it may run on). Two workers whose OpenMP threads each spun on every core would take
  longer than one (docs/developing.md);
- ``made_once()``: what a session fixture makes (a trained model, a quickstart run) is made
  by the first worker that asks for it, in a directory every worker reads, while the others
  wait for it: each model is trained once per test session, as ``pytest --setup-plan``
  shows without workers (tests/test_fixtures.py).

Standard library only, and nothing here imports torch: conftest calls the first before
anything imports it.
"""

import json
import os
import shutil
from pathlib import Path
from typing import Callable

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1", ... in a worker; None without workers
_RESULT = "made.json"  # written last, so its presence says the directory is complete


def environment_of_a_new_session() -> dict:
    """This process's environment without pytest-xdist's variables, for a pytest session that
    a test starts: it is a session of its own, not a worker (``_WORKER`` reads them)."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_XDIST_")}


def keep_to_a_share_of_the_cpus() -> None:
    """Worker gwN of K keeps to every K-th of the CPUs it was given, starting at the N-th
    (one CPU each where there are as many workers as CPUs). Nothing without workers."""
    if _WORKER is None:
        return
    index, count = int(_WORKER[2:]), int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(cpus[index % len(cpus)::count]))


def _encoded(value):
    if isinstance(value, Path):
        return {"path": str(value)}
    if isinstance(value, tuple):
        return {"tuple": [_encoded(item) for item in value]}
    if isinstance(value, str):
        return value
    raise TypeError(f"a session fixture's value is paths and text, got {type(value).__name__}")


def _decoded(value):
    if isinstance(value, dict) and "path" in value:
        return Path(value["path"])
    if isinstance(value, dict):
        return tuple(_decoded(item) for item in value["tuple"])
    return value


def made_once(tmp_path_factory, name: str, make: Callable[[Path], object]):
    """``make(directory)``'s value (paths and text), made once per test session in a new
    directory: without workers, there and then; with workers, by the first that asks, in a
    directory under the session's temporary one, while the others wait on its lock and then
    read the value it wrote."""
    if _WORKER is None:
        return make(tmp_path_factory.mktemp(name))
    from filelock import FileLock  # torch's own dependency

    directory = tmp_path_factory.getbasetemp().parent / name  # the session's, beside each worker's own
    with FileLock(str(directory) + ".lock"):
        result = directory / _RESULT
        if result.is_file():
            return _decoded(json.loads(result.read_text(encoding="utf-8")))
        shutil.rmtree(directory, ignore_errors=True)  # a worker whose make() failed left it unfinished
        directory.mkdir()
        value = make(directory)
        result.write_text(json.dumps(_encoded(value)), encoding="utf-8")
        return value


def files_longest_first(items) -> None:
    """With workers, the test files in the order they are handed out (pytest.ini's ``--dist
    loadfile``: a file's tests run in one worker, its module fixtures made once): first those
    with ``long`` tests (most first), then the other ``slow`` ones, then the rest, each group
    in collection order, so that no file of minutes starts last and runs alone. Without
    workers, collection order."""
    if _WORKER is None:
        return
    files = {}
    for position, item in enumerate(items):
        name = item.nodeid.split("::")[0]
        first, long_tests, slow = files.get(name, (position, 0, False))
        files[name] = (first, long_tests + bool(item.get_closest_marker("long")),
                       slow or bool(item.get_closest_marker("slow")))

    def order(item):
        first, long_tests, slow = files[item.nodeid.split("::")[0]]
        return -long_tests, not slow, first

    items.sort(key=order)  # stable: each file's tests keep their order
