"""The servers the serve tests talk to: fconv-serve subprocesses on 127.0.0.1 (``server.Server``).

Each starts once per session: no test changes them (the counters the metrics test reads it
reads as differences); a test that needs other options or stops a server starts its own."""

import pytest

from tests.serve.server import Server


@pytest.fixture(scope="session")
def served(trained_model, tmp_path_factory):
    """The tiny model behind fconv-serve, with a window wide enough that concurrent requests share calls."""
    data_bin, save_dir, _ = trained_model
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--beam", "5", "--batch-window-ms", "300",
                    log_path=tmp_path_factory.mktemp("serve") / "serve.log")
    yield server, data_bin, save_dir / "checkpoint_best.pt"
    server.stop()


@pytest.fixture(scope="session")
def served_int8(trained_model, int8_checkpoint, tmp_path_factory):
    """The same model quantised by fconv-quantize, behind fconv-serve with the same window."""
    data_bin, _, _ = trained_model
    server = Server(data_bin, int8_checkpoint, "--beam", "5", "--batch-window-ms", "300",
                    log_path=tmp_path_factory.mktemp("serve_int8") / "serve.log")
    yield server, data_bin, int8_checkpoint
    server.stop()


@pytest.fixture(scope="session")
def served_models(trained_model, int8_checkpoint, tmp_path_factory):
    """Two models behind one server: the float32 checkpoint ("default") and its int8 form ("int8")."""
    data_bin, save_dir, _ = trained_model
    int8 = int8_checkpoint
    # --max-sentence-tokens: a long sentence stays one piece (the page's heat maps are capped)
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--model", f"int8={int8}", "--beam", "5",
                    "--max-sentence-tokens", "200", log_path=tmp_path_factory.mktemp("serve_models") / "serve.log")
    yield server, data_bin, {"default": save_dir / "checkpoint_best.pt", "int8": int8}
    server.stop()


@pytest.fixture(scope="session")
def served_copying(name_task, tmp_path_factory):
    """The names task's copying (pointer-generator) model behind fconv-serve."""
    root, data_bin, copying = name_task
    server = Server(data_bin, copying, "--beam", "5", log_path=tmp_path_factory.mktemp("serve_copying") / "serve.log")
    yield server, root, data_bin, copying
    server.stop()
