"""fconv-serve run as a user runs it: a subprocess on 127.0.0.1, serving the tiny task's model."""

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests.cli.conftest import BIN_DIR, name_task, run_tool, trained_model, word_task  # noqa: F401  (fixtures)
from tests.support import free_port


class Server:
    def __init__(self, data_bin, checkpoint, *options, log_path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [str(BIN_DIR / "fconv-serve"), str(data_bin), "--path", str(checkpoint), "--port", str(self.port), *map(str, options)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"fconv-serve exited ({self.process.returncode}):\n{open(log_path).read()[-3000:]}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("fconv-serve did not answer /health in 120 s")
            time.sleep(0.2)

    def request(self, path, body: bytes = None, timeout: float = 60):
        """(status, decoded JSON answer)."""
        request = urllib.request.Request(self.url + path, data=body, method="GET" if body is None else "POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def get(self, path):
        return self.request(path)

    def translate(self, **request):
        return self.request("/translate", json.dumps(request).encode())

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


@pytest.fixture(scope="module")
def served(trained_model, tmp_path_factory):  # noqa: F811
    """The tiny model behind fconv-serve, with a window wide enough that concurrent requests share calls."""
    data_bin, save_dir, _ = trained_model
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--beam", "5", "--batch-window-ms", "300",
                    log_path=tmp_path_factory.mktemp("serve") / "serve.log")
    yield server, data_bin, save_dir / "checkpoint_best.pt"
    server.stop()


@pytest.fixture(scope="session")
def int8_checkpoint(trained_model, tmp_path_factory):  # noqa: F811
    """The tiny model quantised by fconv-quantize (once for the session)."""
    _, save_dir, _ = trained_model
    checkpoint = tmp_path_factory.mktemp("int8") / "int8.pt"
    run_tool("fconv-quantize", save_dir / "checkpoint_best.pt", checkpoint)
    return checkpoint


@pytest.fixture(scope="module")
def served_int8(trained_model, int8_checkpoint, tmp_path_factory):  # noqa: F811
    """The same model quantised by fconv-quantize, behind fconv-serve with the same window."""
    data_bin, _, _ = trained_model
    server = Server(data_bin, int8_checkpoint, "--beam", "5", "--batch-window-ms", "300",
                    log_path=tmp_path_factory.mktemp("serve_int8") / "serve.log")
    yield server, data_bin, int8_checkpoint
    server.stop()


@pytest.fixture(scope="module")
def served_models(trained_model, int8_checkpoint, tmp_path_factory):  # noqa: F811
    """Two models behind one server: the float32 checkpoint ("default") and its int8 form ("int8")."""
    data_bin, save_dir, _ = trained_model
    int8 = int8_checkpoint
    # --max-sentence-tokens: a long sentence stays one piece (the page's heat maps are capped)
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--model", f"int8={int8}", "--beam", "5",
                    "--max-sentence-tokens", "200", log_path=tmp_path_factory.mktemp("serve_models") / "serve.log")
    yield server, data_bin, {"default": save_dir / "checkpoint_best.pt", "int8": int8}
    server.stop()


@pytest.fixture(scope="module")
def served_copying(name_task, tmp_path_factory):  # noqa: F811
    """The names task's copying (pointer-generator) model behind fconv-serve."""
    root, data_bin, copying = name_task
    server = Server(data_bin, copying, "--beam", "5", log_path=tmp_path_factory.mktemp("serve_copying") / "serve.log")
    yield server, root, data_bin, copying
    server.stop()
