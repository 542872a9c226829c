"""The path docs/design.md writes down for a POST /translate is the path the code runs.

One real request of each protocol (the native API's and LibreTranslate's) goes to the app
in-process (starlette's TestClient over fconv-serve's own option reading, batcher and
app), after one request of each has built what later ones reuse (the generator), while a
profile hook (``sys.setprofile``, ``threading.setprofile``) records each function of
``fconv_plugin/serve/`` and ``fconv_plugin/inference/`` the request enters, and each
function of the plugin those call into, directly or through fairseq's or torch's code (the
layers below: one hop each, not their insides), in the order first entered, in the
request's threads and in the generation thread apart. The lists must be the design
document's, hop for hop."""

import itertools
import re
import sys
import threading
from pathlib import Path

import pytest

import fconv_plugin

pytestmark = pytest.mark.slow  # trains the tiny model (the session's fixture)

PACKAGE = Path(fconv_plugin.__file__).parent
TRACED = (PACKAGE / "serve", PACKAGE / "inference")  # the layers whose path is written down
DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"
GENERATION_THREAD = "fconv-serve-generation"
NATIVE = {"text": "s1 s2 s3", "beam": 2}
LIBRETRANSLATE = {"q": "s1 s2 s3", "source": "src", "target": "tgt"}
COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")  # a function's own loops, not hops


def _hop(code) -> str:
    """``serve/app.py:create_app.<locals>.translate``: the file below the package and the qualified name."""
    return f"{Path(code.co_filename).relative_to(PACKAGE).as_posix()}:{code.co_qualname}"


def _in(filename: str, folders) -> bool:
    return any(filename.startswith(str(folder) + "/") for folder in folders)


class PathRecorder:
    """The plugin functions entered while ``recording``, in first-entry order per side."""

    def __init__(self):
        self.recording = threading.Event()
        self.round_done = threading.Event()
        self.hops = {"request": [], "generation": []}
        self._lock = threading.Lock()

    def round_observed(self, sentences, tokens, seconds):
        self.round_done.set()

    def profile(self, frame, event, arg):
        if event != "call" or not self.recording.is_set():
            return
        code = frame.f_code
        if not _in(code.co_filename, [PACKAGE]) or code.co_name in COMPREHENSIONS:
            return
        if not _in(code.co_filename, TRACED):  # a layer below: only where the traced layers enter it
            caller = frame.f_back
            while caller is not None and not _in(caller.f_code.co_filename, [PACKAGE]):
                caller = caller.f_back  # through fairseq's and torch's frames (a decorator, a task's method)
            if caller is None or not _in(caller.f_code.co_filename, TRACED):
                return
        side = "generation" if threading.current_thread().name == GENERATION_THREAD else "request"
        hop = _hop(code)
        with self._lock:
            if hop not in self.hops[side]:
                self.hops[side].append(hop)


def documented_hops(title: str):
    """The hops of the first numbered list after the heading ``title`` in docs/design.md:
    each item's first code span, ``file.py:function``."""
    lines = DESIGN.read_text().split(f"\n{title}\n", 1)[1].splitlines()
    first = next(i for i, line in enumerate(lines) if re.match(r"\d+\. ", line))
    items = [line for line in itertools.takewhile(lambda line: re.match(r"\d+\. ", line), lines[first:])]
    return [re.match(r"\d+\. `([\w/]+\.py:[\w.<>]+)`", item).group(1) for item in items]


@pytest.fixture(scope="module")
def traced_app(trained_model):
    """The app as fconv-serve builds it, with the profile hook in every thread it starts."""
    from starlette.testclient import TestClient

    from fconv_plugin.serve import main as serve_main
    from fconv_plugin.serve.app import create_app

    data_bin, save_dir, _ = trained_model
    recorder = PathRecorder()
    threading.setprofile(recorder.profile)
    sys.setprofile(recorder.profile)
    try:
        args = serve_main.read_options([str(data_bin), "--path", str(save_dir / "checkpoint_best.pt"), "--beam", "2",
                                     "--timeout", "300"])  # the profile hook slows every call
        cfg, limits, checkpoints, api_keys = serve_main.configuration(args)
        batcher, translators = serve_main.started_batcher(args, cfg, checkpoints)
        app = create_app(translators, args.name, batcher, limits, api_keys, args.cors_origin)
        batcher.observers.append(recorder.round_observed)  # after the app's own (the metrics')
        with TestClient(app) as client:
            for body in (NATIVE, LIBRETRANSLATE):  # what the first request builds, built, its round over
                recorder.round_done.clear()
                assert client.post("/translate", json=body).status_code == 200
                assert recorder.round_done.wait(60)
            yield client, recorder
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


def _traced(client, recorder, body):
    recorder.hops = {"request": [], "generation": []}
    recorder.round_done.clear()
    recorder.recording.set()
    try:
        response = client.post("/translate", json=body)
        assert recorder.round_done.wait(30)  # the generation thread's observers too, which run after the answer
    finally:
        recorder.recording.clear()
    assert response.status_code == 200, response.text
    return recorder.hops


@pytest.mark.parametrize("body,request_list", [
    (NATIVE, "#### The request's threads: the native API"),
    (LIBRETRANSLATE, "#### The request's threads: LibreTranslate's API"),
], ids=["native", "libretranslate"])
def test_a_requests_path_is_the_documented_one(traced_app, body, request_list):
    client, recorder = traced_app
    hops = _traced(client, recorder, body)
    print("\nREQUEST", *hops["request"], "GENERATION", *hops["generation"], sep="\n")  # shown where it fails
    assert hops["request"] == documented_hops(request_list)
    assert hops["generation"] == documented_hops("#### The generation thread")
