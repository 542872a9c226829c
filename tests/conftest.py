"""The session's fixtures, in one place that every test module reaches without importing
them: each trains its model once per session (``tests/test_fixtures.py`` checks
``pytest --setup-plan``), shared among pytest-xdist's workers (``tests/workers.py``). The
tasks and helpers they use are in ``tests/tasks.py``."""

import shutil
import sys
import warnings
from pathlib import Path

from tests import workers

workers.keep_to_a_share_of_the_cpus()  # before torch is imported: it counts the CPUs then

import pytest  # noqa: E402
import torch  # noqa: E402

from fconv_plugin import compat
from tests import warm_commands
from tests.tasks import (
    PAPER_OPTIMIZER,
    PLUGIN_DIR,
    SMALL_MODEL,
    TWENTY_UPDATES,
    held_out_pair,
    preprocess,
    run_tool,
    train_names_model,
    training_pair,
    unk_pair,
    word_translation_pair,
    write_corpus,
)

# Tests that run fairseq in this process (loading checkpoints, beam search with
# n-gram blocking) see it as fairseq's commands do with --user-dir fconv_plugin.
# What importing the plugin alone does is tested in fresh processes
# (tests/compat/test_install.py).
compat.install()

# fairseq's reference model uses torch's deprecated weight_norm; keep test output readable.
warnings.filterwarnings("ignore", category=FutureWarning)


def pytest_collection_modifyitems(items):
    workers.files_longest_first(items)


_WORKERS_WARM_LOGS = []


def pytest_sessionfinish(session):
    """A worker hands its warm process's log to the session's report."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["warm_commands_log"] = warm_commands.log()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's hook: a worker ended, with what it handed over."""
    _WORKERS_WARM_LOGS.append(getattr(node, "workeroutput", {}).get("warm_commands_log", ""))


def pytest_terminal_summary(terminalreporter):
    """CI's log says how the session's commands ran (tests/warm_commands.py), in every worker."""
    text = warm_commands.log() + "".join(_WORKERS_WARM_LOGS)
    if text:
        terminalreporter.write_line(f"tests/warm_commands.py: {warm_commands.summary(text)}")


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory):
    """A real quickstart run of 8 updates, trained, not evaluated (``benchmarks/harness.quick_run``:
    the quickstart's own script), for what reads a run's files: the benchmarks' --quick
    modes, documented command lines."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import harness

    return workers.made_once(tmp_path_factory, "quickstart",
                             lambda directory: harness.quick_run(directory / "run", venv=warm_commands.venv_dir()))


def _word_task(root):
    write_corpus(root, word_translation_pair)
    return root, preprocess(root, root / "data-bin")


@pytest.fixture(scope="session")
def word_task(tmp_path_factory):
    """Binarised data of the tiny task."""
    return workers.made_once(tmp_path_factory, "word_task", _word_task)


@pytest.fixture(scope="session")
def trained_model(word_task, tmp_path_factory):
    """A small model trained through fairseq-train --user-dir; (data-bin, checkpoint dir, log)."""
    _, data_bin = word_task

    def train(root):
        result = run_tool(
            "fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER,
            "--dropout", "0.1", "--max-tokens", "300", "--max-epoch", "10", "--save-dir", root / "checkpoints",
            "--seed", "1", "--no-progress-bar", "--log-format", "simple", "--no-epoch-checkpoints",
        )
        return data_bin, root / "checkpoints", result.stdout + result.stderr

    return workers.made_once(tmp_path_factory, "trained_model", train)


def _unk_model(root):
    write_corpus(root, unk_pair, sizes=(("train", 1500), ("valid", 60), ("test", 80)), seed=5)
    data_bin = preprocess(root, root / "data-bin", "--thresholdsrc", "3", "--thresholdtgt", "3")
    run_tool(
        "fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER,
        "--dropout", "0.1", "--max-tokens", "400", "--max-epoch", "12", "--save-dir", root / "checkpoints",
        "--seed", "1", "--no-progress-bar", "--no-epoch-checkpoints",
    )
    return root, data_bin, root / "checkpoints" / "checkpoint_best.pt"


@pytest.fixture(scope="session")
def unk_model(tmp_path_factory):
    """A word-level model whose rare words are only ever <unk>: (text dir, data-bin, checkpoint)."""
    return workers.made_once(tmp_path_factory, "unk_task", _unk_model)


def _name_task(root):
    write_corpus(root, training_pair, sizes=(("train", 1600), ("valid", 60)), seed=7)
    write_corpus(root, held_out_pair, sizes=(("test", 60),), seed=8)
    data_bin = preprocess(root, root / "data-bin", "--joined-dictionary")
    copying = train_names_model(data_bin, root / "copy", "fconv_gigaword_copy")
    return root, data_bin, copying


@pytest.fixture(scope="session")
def name_task(tmp_path_factory):
    """A synthetic summarisation task where the summary names the first name of the source:
    "c3 c7 n12 c1 n1345 c9" -> "n12 c3 c7". In training the names to output are n0..n999,
    each seen once or twice, and the second names n1000..n1399; the test's names are all
    n1000..n1399, which the model has read but never written. (root, data-bin, the
    trained copying checkpoint.)"""
    return workers.made_once(tmp_path_factory, "names", _name_task)


@pytest.fixture(scope="session")
def int8_checkpoint(trained_model, tmp_path_factory):
    """``trained_model``'s best checkpoint quantised by fconv-quantize, once for the session."""
    _, save_dir, _ = trained_model

    def quantise(root):
        run_tool("fconv-quantize", save_dir / "checkpoint_best.pt", root / "int8.pt")
        return root / "int8.pt"

    return workers.made_once(tmp_path_factory, "int8", quantise)


@pytest.fixture(scope="session")
def copying_int8_checkpoint(name_task, tmp_path_factory):
    """``name_task``'s copying checkpoint quantised by fconv-quantize, once for the session."""
    _, data_bin, copying = name_task

    def quantise(root):
        run_tool("fconv-quantize", copying, root / "int8.pt", "--data", data_bin)
        return root / "int8.pt"

    return workers.made_once(tmp_path_factory, "copying_int8", quantise)


@pytest.fixture(scope="session")
def _twenty_update_run(word_task, tmp_path_factory):
    _, data_bin = word_task

    def train(root):
        save_dir = root / "checkpoints"
        result = run_tool("fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *TWENTY_UPDATES, "--max-update", "20",
                          "--save-dir", save_dir)
        return data_bin, save_dir, result.stdout + result.stderr

    return workers.made_once(tmp_path_factory, "twenty_updates", train)


@pytest.fixture
def twenty_update_run(_twenty_update_run, tmp_path):
    """A finished 20-update fairseq-train run (``TWENTY_UPDATES``, saves at 10 and 20), trained
    once per session; each test gets its own copy of the checkpoints to train on or damage:
    (data-bin, checkpoint dir, the run's log)."""
    data_bin, save_dir, log = _twenty_update_run
    copy = tmp_path / "checkpoints"
    shutil.copytree(save_dir, copy)
    return data_bin, copy, log
