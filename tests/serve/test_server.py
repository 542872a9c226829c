"""fconv-serve against fairseq-interactive: same answers, batching across requests, limits, shutdown."""

import json
import random
import re
import signal
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.tasks import interactive_answers, run_tool
from tests.serve.server import Server

pytestmark = pytest.mark.slow


def _sentences(count, seed):
    rng = random.Random(seed)
    return [" ".join(f"s{rng.randrange(30)}" for _ in range(rng.randint(3, 9))) for _ in range(count)]


def _same(served_answer, interactive_answer):
    # batched rows go through other matrix-product shapes: scores agree to float32 rounding
    return served_answer["text"] == interactive_answer["text"] and abs(served_answer["score"] - interactive_answer["score"]) < 1e-4


@pytest.mark.parametrize("weights", ["served", "served_int8"])
def test_concurrent_requests_share_generation_calls_and_answer_as_fairseq_interactive(weights, request):
    """int8 too: each row of activations has its own scale, so a batch changes no sentence's answer."""
    server, data_bin, checkpoint = request.getfixturevalue(weights)
    lines = _sentences(24, seed=1)
    expected = interactive_answers(data_bin, checkpoint, lines)
    answers = [None] * len(lines)

    def client(indices):
        for i in indices:
            status, answer = server.translate(text=lines[i])
            assert status == 200, answer
            answers[i] = answer["translations"][0]

    calls_before = server.get("/health")[1]["batching"]["calls"]
    threads = [threading.Thread(target=client, args=(range(k, 24, 8),)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(_same(a, e) for a, e in zip(answers, expected)), [(a, e) for a, e in zip(answers, expected) if not _same(a, e)]
    batching = server.get("/health")[1]["batching"]
    assert batching["largest_call"] > 1  # sentences of several requests went through one call
    assert batching["calls"] - calls_before < len(lines)


def test_a_list_keeps_its_order_and_alignment_is_the_print_alignment_of_fairseq_interactive(served):
    server, data_bin, checkpoint = served
    lines = _sentences(6, seed=2)
    expected = interactive_answers(data_bin, checkpoint, lines, "--print-alignment")
    status, answer = server.translate(text=lines, alignment=True, beam=5)
    assert status == 200
    assert [a["text"] for a in answer["translations"]] == [e["text"] for e in expected]
    assert [a["alignment"] for a in answer["translations"]] == [e["alignment"] for e in expected]


def test_beam_one_answers_as_fairseq_interactive_with_beam_one(served):
    server, data_bin, checkpoint = served
    lines = _sentences(4, seed=3)
    expected = [answer["text"] for answer in interactive_answers(data_bin, checkpoint, lines, beam=1)]
    status, answer = server.translate(text=lines, beam=1)
    assert status == 200 and [a["text"] for a in answer["translations"]] == expected


def test_lines_with_nothing_to_translate_come_back_unchanged(served):
    """Emoji, punctuation, numbers and links alone are not sentences: the model would invent
    one ("And it came to pass..."); they come back as sent, beside a translated line."""
    server, data_bin, checkpoint = served
    lines = ["🙏", "¡¡¡ ... !!!", _sentences(1, seed=4)[0], "3:16", "https://example.org/s1"]
    expected = interactive_answers(data_bin, checkpoint, [lines[2]])[0]["text"]
    status, answer = server.translate(text=lines, alignment=True)
    assert status == 200
    assert [a["text"] for a in answer["translations"]] == [*lines[:2], expected, *lines[3:]]
    status, answer = server.translate(q="🙏", source="src", target="tgt")  # LibreTranslate's shape
    assert status == 200 and answer["translatedText"] == "🙏"


def test_a_text_with_line_breaks_or_marked_as_a_document_is_translated_as_one(served):
    """A document: each line's sentences translated as fairseq-interactive translates them
    alone, the lines and blank lines kept; an over-long sentence is split, not refused."""
    server, data_bin, checkpoint = served
    lines = _sentences(4, seed=4)
    expected = [answer["text"] for answer in interactive_answers(data_bin, checkpoint, lines)]
    text = f"{lines[0]}\n{lines[1]}\n\n{lines[2]}\r\n{lines[3]}"
    status, answer = server.translate(text=[text, lines[0]])
    assert status == 200
    document, sentence = answer["translations"]
    assert document["text"] == f"{expected[0]}\n{expected[1]}\n\n{expected[2]}\n{expected[3]}"
    assert [s["text"] for s in document["sentences"]] == expected
    assert sentence == {"text": expected[0], "score": sentence["score"]}
    long_line = " ".join(["s1 s2 s3"] * 400)  # 1,200 words: over the model's 1,022 positions
    assert server.translate(text=long_line)[0] == 413
    status, answer = server.translate(text=long_line, document=True)
    assert status == 200 and len(answer["translations"][0]["sentences"]) > 1
    assert "\n" not in answer["translations"][0]["text"]


def test_models_health_and_attention_for_the_page(served):
    server, _, _ = served
    status, models = server.get("/models")
    assert status == 200 and models["default"] == "default"
    (model,) = models["models"]
    assert model["arch"] == "fconv_iwslt_de_en" and model["int8"] is False
    assert model["source_dictionary"] > 30 and model["target_dictionary"] > 30
    status, answer = server.translate(text="s1 s2 s3", attention=True)
    attention = answer["translations"][0]["attention"]
    assert attention["source"] == ["s1", "s2", "s3", "</s>"]
    assert len(attention["layers"]) == model["attention_layers"] == 2
    for layer in attention["layers"]:  # target x source, each row a distribution over the source
        assert len(layer) == len(attention["target"])
        assert all(len(row) == 4 and abs(sum(row) - 1) < 1e-3 for row in layer)
    status, answer = server.translate(text=["s1 s2 s3", "🙏 3:16"], attention=True)  # the second is passed through
    assert status == 200 and answer["translations"][0]["attention"] == attention
    assert answer["translations"][1] == {"text": "🙏 3:16", "score": 0.0, "attention": None}


BAD_REQUESTS = [
    (b'{"text": "s1 s2"', 400, "not valid JSON"),
    (b'{"text": "s1 \xff s2"}', 400, "not valid UTF-8"),
    (b'["s1"]', 422, "must be a JSON object"),
    (b'{"txt": "s1"}', 422, "unknown field 'txt'"),
    (b'{"text": 7}', 422, '"text" must be a string or a list of strings'),
    (b'{"text": ""}', 422, "the sentence is empty"),
    (b'{"text": ["s1", "  "]}', 422, "sentence 2 is empty"),
    (b'{"text": []}', 422, "empty list"),
    (b'{"text": "s1", "beam": "5"}', 422, '"beam" must be a whole number'),
    (b'{"text": "s1", "beam": 1000}', 422, '"beam" must be a whole number from 1 to 20'),
    (b'{"text": "s1", "alignment": "yes"}', 422, '"alignment" must be true or false'),
    (b'{"text": "s1", "model": "other"}', 404, "no model named 'other'"),
    (b'{"text": "s1", "model": {}}', 422, "\"model\" must be a model's name, got {}"),
    (json.dumps({"text": ["s1"] * 65}).encode(), 413, "65 sentences in one request; the limit is 64"),
    (json.dumps({"text": " ".join(["s1"] * 1100)}).encode(), 413, "tokens; the model reads at most"),
    (json.dumps({"text": "s1 " * 30000}).encode(), 413, "the limit is 65536"),
]


@pytest.mark.parametrize("body,status,message", BAD_REQUESTS, ids=[m for _, _, m in BAD_REQUESTS])
def test_bad_requests_get_a_one_line_error_and_the_server_keeps_serving(served, body, status, message):
    server, _, _ = served
    got, answer = server.request("/translate", body)
    assert got == status and list(answer) == ["error"]
    assert message in answer["error"] and "\n" not in answer["error"]
    assert server.translate(text="s1 s2")[0] == 200


def test_unknown_paths_and_methods_get_the_same_error_shape(served):
    server, _, _ = served
    assert server.get("/nope") == (404, {"error": "Not Found: GET /nope"})
    assert server.get("/translate") == (405, {"error": "Method Not Allowed: GET /translate"})


def test_a_request_that_waits_longer_than_the_timeout_gets_503(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    # the batching window alone (2 s) outlasts the timeout (0.2 s)
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--timeout", "0.2", "--batch-window-ms", "2000",
                    log_path=tmp_path / "serve.log")
    try:
        status, answer = server.translate(text="s1 s2 s3")
        assert status == 503 and "longer than 0.2 s (--timeout)" in answer["error"]
        assert server.get("/health")[0] == 200
    finally:
        server.stop()


def test_a_full_queue_answers_429_with_retry_after_at_once_and_the_queued_request_is_answered(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    # the window (1.5 s) keeps the first request queued while the next ones arrive
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--max-queue-sentences", "8", "--max-request-sentences", "8",
                    "--batch-window-ms", "1500", log_path=tmp_path / "serve.log")
    try:
        first = {}
        thread = threading.Thread(target=lambda: first.update(answer=server.translate(text=["s1 s2"] * 8)))
        thread.start()
        time.sleep(0.5)
        refused = 0
        for _ in range(5):
            began = time.monotonic()
            request = urllib.request.Request(server.url + "/translate", data=b'{"text": "s3 s4"}',
                                             headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request, timeout=30)
            except urllib.error.HTTPError as error:
                assert error.code == 429 and int(error.headers["Retry-After"]) >= 1
                assert "the queue holds 8" in json.loads(error.read())["error"]
                assert time.monotonic() - began < 0.5  # at once, not after --timeout
                refused += 1
        thread.join(60)
        assert refused == 5 and first["answer"][0] == 200 and len(first["answer"][1]["translations"]) == 8
        status, health = server.get("/health")
        assert status == 200 and health["batching"]["refused"] == 5 and health["batching"]["queued_sentences"] == 0
        assert server.get("/health/live") == (200, {"status": "alive"})
    finally:
        server.stop()


def test_two_replicas_on_two_ports_answer_identically(served, trained_model, tmp_path):
    """The service keeps no state between requests: a second process over the same files
    gives the same texts and scores (what N replicas behind a load balancer need)."""
    first, _, checkpoint = served
    data_bin, _, _ = trained_model
    second = Server(data_bin, checkpoint, "--beam", "5", log_path=tmp_path / "serve.log")
    try:
        assert second.port != first.port
        lines = _sentences(8, seed=41)
        answers = [server.translate(text=lines, alignment=True) for server in (first, second)]
        assert answers[0][0] == answers[1][0] == 200 and answers[0][1] == answers[1][1]
    finally:
        second.stop()


def test_several_models_each_answer_as_fairseq_interactive_with_its_checkpoint(served_models):
    server, data_bin, checkpoints = served_models
    status, models = server.get("/models")
    assert status == 200 and [m["name"] for m in models["models"]] == ["default", "int8"]
    assert [m["int8"] for m in models["models"]] == [False, True]
    lines = _sentences(6, seed=51)
    for name, checkpoint in checkpoints.items():
        expected = interactive_answers(data_bin, checkpoint, lines)
        status, answer = server.translate(text=lines, model=name)
        assert status == 200 and all(_same(a, e) for a, e in zip(answer["translations"], expected)), name


def test_a_copying_model_answers_as_fairseq_interactive_and_shows_p_gen(served_copying):
    server, root, data_bin, checkpoint = served_copying
    lines = (root / "test.src").read_text().splitlines()[:12]
    expected = interactive_answers(data_bin, checkpoint, lines, "--print-alignment")
    status, answer = server.translate(text=lines, alignment=True)
    assert status == 200 and all(_same(a, e) for a, e in zip(answer["translations"], expected))
    assert [a["alignment"] for a in answer["translations"]] == [e["alignment"] for e in expected]
    targets = (root / "test.tgt").read_text().splitlines()[:12]
    assert sum(a["text"].split()[:1] == t.split()[:1] for a, t in zip(answer["translations"], targets)) >= 9  # names copied
    status, answer = server.translate(text=lines[0], attention=True)
    best = answer["translations"][0]
    assert status == 200 and len(best["p_gen"]) == len(best["attention"]["target"])
    assert all(0 <= p <= 1 for p in best["p_gen"]) and min(best["p_gen"]) < 0.5  # the name is copied
    assert server.get("/models")[1]["models"][0]["copying"] is True


def test_sigterm_answers_the_requests_in_flight_then_exits(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--batch-window-ms", "3000", log_path=tmp_path / "serve.log")
    lines = _sentences(6, seed=4)
    answers = {}

    def client(i):
        answers[i] = server.translate(text=lines[i])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the requests are in, waiting in the 3 s window
    server.process.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(timeout=60)
    # uvicorn re-raises the signal once it has shut down cleanly: the exit status says SIGTERM
    assert server.process.wait(timeout=60) in (0, -signal.SIGTERM)
    server.stop()
    assert sorted(answers) == list(range(6))
    assert all(status == 200 and answer["translations"][0]["text"] for status, answer in answers.values())
    log = open(tmp_path / "serve.log").read()
    assert "stopped after 6 requests" in log
    with pytest.raises(OSError):  # and it no longer listens
        socket.create_connection(("127.0.0.1", server.port), timeout=2)


def test_bad_options_stop_with_one_line(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    result = run_tool("fconv-serve", data_bin, "--path", tmp_path / "missing.pt", check=False)
    assert result.returncode != 0
    assert re.search(r"no such checkpoint file .*missing\.pt", result.stderr.strip().splitlines()[-1])
    result = run_tool("fconv-serve", data_bin, "--path", save_dir / "checkpoint_best.pt", "--model", "nonsense", check=False)
    assert result.stderr.strip().splitlines()[-1].endswith("--model nonsense: write it as NAME=CHECKPOINT")
    result = run_tool("fconv-serve", data_bin, "--path", save_dir / "checkpoint_best.pt", "--max-queue-sentences", "10",
                      check=False)
    assert "--max-queue-sentences 10 is below --max-request-sentences 64" in result.stderr.strip().splitlines()[-1]
    keys = tmp_path / "keys.txt"
    keys.write_text("a-key ten\n")
    result = run_tool("fconv-serve", data_bin, "--path", save_dir / "checkpoint_best.pt", "--api-keys", keys, check=False)
    assert result.stderr.strip().splitlines()[-1].endswith(f"--api-keys {keys} line 1: write a key, then optionally its "
                                                           "requests per minute (a whole number above 0)")
    help_text = run_tool("fconv-serve", "--help").stdout
    groups = [line for line in help_text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert groups[:2] == ["fconv-serve:", "options:"]
    assert all(group.startswith("fairseq: ") for group in groups[2:]) and len(groups) > 3
    assert help_text.index("--max-queue-sentences") < help_text.index("--max-tokens")


def test_under_overload_expired_requests_are_counted_as_dropped_and_nothing_is_logged_as_an_error(trained_model,
                                                                                                  tmp_path):
    """Issue 55: 28 of 40 clients got 503 and the log showed 16 'Future exception was never
    retrieved ... DeadlinePassed' while expired calls went on being translated."""
    data_bin, save_dir, _ = trained_model
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--timeout", "0.4", "--max-queue-sentences", "4096",
                    "--max-batch-sentences", "256", "--beam", "12", log_path=tmp_path / "serve.log")
    rng = random.Random(5)
    statuses = []
    try:
        def client():
            text = [" ".join(f"s{rng.randrange(30)}" for _ in range(12)) for _ in range(64)]
            statuses.append(server.translate(text=text)[0])

        threads = [threading.Thread(target=client) for _ in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        time.sleep(1.0)  # the last round ends; what expired in it is counted
        status, health = server.get("/health")
        metrics = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    finally:
        server.stop()
    assert set(statuses) <= {200, 503} and len(statuses) == 40
    dropped = statuses.count(503)
    assert dropped > 0, "no request expired: the test did not overload the server"
    assert health["batching"]["expired"] == dropped and health["batching"]["requests"] == statuses.count(200)
    assert health["batching"]["queued_sentences"] == 0
    assert re.search(rf"^fconv_serve_expired_total {dropped}\.0$", metrics, re.M)
    # what expired left its round: fewer sentences translated than were sent
    assert health["batching"]["sentences"] < 64 * 40
    log = (tmp_path / "serve.log").read_text()
    assert not [line for line in log.splitlines() if "ERROR" in line or "Traceback" in line], log[-3000:]


def test_a_20000_character_document_goes_through_the_api_in_parts(served):
    """Issue 55: a realistic document got 413 '160 sentences in one request; the limit is 64'.
    Its sentences are queued in parts of --max-request-sentences; each is translated as
    fairseq-interactive translates it alone, and its lines and paragraphs are kept."""
    server, data_bin, checkpoint = served
    rng = random.Random(55)
    paragraphs, characters = [], 0
    while characters < 20000:
        paragraph = " ".join(" ".join(f"s{rng.randrange(30)}" for _ in range(rng.randint(3, 9))) + "."
                             for _ in range(rng.randint(2, 6)))
        paragraphs.append(paragraph)
        characters += len(paragraph) + 2
    document = "\n\n".join(paragraphs)
    sentences = [sentence for paragraph in paragraphs for sentence in paragraph.split(". ")]
    assert len(document) >= 20000 and len(sentences) > 64 * 10
    before = server.get("/health")[1]["batching"]
    status, answer = server.translate(text=document, document=True)
    assert status == 200, answer
    translated = answer["translations"][0]
    assert len(translated["sentences"]) == len(sentences)
    assert translated["text"].count("\n\n") == len(paragraphs) - 1
    after = server.get("/health")[1]["batching"]
    assert after["calls"] - before["calls"] >= len(sentences) // 64 and after["largest_call"] <= 128
    sample = sorted(rng.sample(range(len(sentences)), 12))
    expected = interactive_answers(data_bin, checkpoint, [sentences[i].rstrip(".") + "." for i in sample])
    assert [translated["sentences"][i]["text"] for i in sample] == [e["text"] for e in expected]
    # LibreTranslate's clients send a document as q
    status, libre = server.translate(q=document, source="src", target="tgt")
    assert status == 200 and libre["translatedText"] == translated["text"]
    status, error = server.translate(text=document * 3, document=True)
    assert status == 413 and error["error"].startswith(f"{len(document) * 3} characters in one request; the limit is 50000")
