"""/metrics in Prometheus' format: the numbers move as requests are served."""

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.serve.test_server import _sentences

pytestmark = pytest.mark.slow


def _scrape(server) -> dict:
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_requests_sentences_tokens_and_calls_are_counted(served):
    server, _, _ = served
    before = _scrape(server)
    lines = _sentences(6, seed=31)
    assert server.translate(text=lines)[0] == 200
    assert server.translate(text=lines[:2])[0] == 200
    assert server.translate(text="")[0] == 422
    after = _scrape(server)
    ok = ("fconv_serve_requests_total", {"path": "/translate", "status": "200"})
    assert _value(after, ok[0], **ok[1]) - _value(before, ok[0], **ok[1]) == 2
    assert _value(after, "fconv_serve_requests_total", path="/translate", status="422") - \
        _value(before, "fconv_serve_requests_total", path="/translate", status="422") == 1
    assert _value(after, "fconv_serve_sentences_total") - _value(before, "fconv_serve_sentences_total") == 8
    tokens = sum(len(line.split()) + 1 for line in lines + lines[:2])  # the tiny task has no BPE
    assert _value(after, "fconv_serve_source_tokens_total") - _value(before, "fconv_serve_source_tokens_total") == tokens
    calls = _value(after, "fconv_serve_generation_sentences_count") - _value(before, "fconv_serve_generation_sentences_count")
    assert calls == 2 and _value(after, "fconv_serve_generation_sentences_sum") - \
        _value(before, "fconv_serve_generation_sentences_sum") == 8
    assert _value(after, "fconv_serve_request_seconds_count", path="/translate") - \
        _value(before, "fconv_serve_request_seconds_count", path="/translate") == 3
    assert _value(after, "fconv_serve_queue_sentences") == 0
    assert ("fconv_serve_refused_total", ()) in after
