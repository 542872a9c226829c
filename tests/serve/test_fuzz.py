"""The HTTP API fuzzed from its own OpenAPI document with schemathesis (seeded, a fixed
number of cases per operation): every answer is a success or a 4xx with the one-line
{"error"} shape, never a 5xx, and the server answers afterwards."""

import collections
import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from fconv_plugin.serve.openapi import openapi_document
from tests.serve.server import Server

pytestmark = pytest.mark.slow

SCHEMA = schemathesis.openapi.from_dict(openapi_document(["default"]))
CASES_PER_OPERATION = 60
STATUSES = collections.Counter()


@pytest.fixture(scope="module")
def fuzzed(trained_model, tmp_path_factory):
    data_bin, save_dir, _ = trained_model
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--max-beam", "8",
                    log_path=tmp_path_factory.mktemp("fuzz") / "serve.log")
    yield server
    server.stop()


@SCHEMA.parametrize()
@settings(max_examples=CASES_PER_OPERATION, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_every_answer_is_a_success_or_a_one_line_client_error(case, fuzzed):
    response = case.call(base_url=fuzzed.url, timeout=60)
    STATUSES[response.status_code] += 1
    assert response.status_code < 500, (case.body, response.text)
    if response.status_code >= 400:
        answer = response.json()
        assert list(answer) == ["error"] and isinstance(answer["error"], str) and "\n" not in answer["error"], answer


def test_the_server_still_answers_after_the_fuzzing(fuzzed):
    assert sum(STATUSES.values()) >= CASES_PER_OPERATION  # the fuzzing ran before this test
    assert fuzzed.translate(text="s1 s2 s3")[0] == 200
    assert fuzzed.get("/health")[0] == 200
    print("fuzzed answers by status:", json.dumps(dict(sorted(STATUSES.items()))))
