"""The test session trains each model once: its fixtures live in conftest files that every
module reaches, and no test module imports one (an imported fixture is a second definition
with a cache of its own, so its model was trained again for that module)."""

import ast
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests import workers

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _fixture_names() -> set:
    """Every fixture the conftest files define."""
    names = set()
    for conftest in TESTS.rglob("conftest.py"):
        for node in ast.walk(ast.parse(conftest.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list):
                names.add(node.name)
    return names


def test_no_test_module_imports_a_fixture():
    fixtures = _fixture_names()
    assert {"word_task", "trained_model", "int8_checkpoint", "served"} <= fixtures
    imported = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
                imported += [(path.relative_to(ROOT).as_posix(), a.name) for a in node.names if a.name in fixtures]
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("conftest"):
                imported.append((path.relative_to(ROOT).as_posix(), node.module))
    assert imported == []


@pytest.mark.slow  # collects the whole suite (about 15 s)
def test_each_session_fixture_is_set_up_once():
    """``pytest --setup-plan``: every session fixture, the trained models among them, once (in
    one process, -n 0: pytest-xdist's workers share what they make through tests/workers.py)."""
    plan = subprocess.run([sys.executable, "-m", "pytest", "--setup-plan", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "tests"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=workers.environment_of_a_new_session())
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    setups = Counter(re.findall(r"^\s*SETUP\s+S (\w+)", plan.stdout, flags=re.M))
    assert {"word_task", "trained_model", "unk_model", "name_task", "int8_checkpoint", "copying_int8_checkpoint",
            "served"} <= set(setups)
    assert {name: count for name, count in setups.items() if count > 1} == {}
