"""API keys from a file and their per-key limits (hand-checked cases with a clock we move),
then a server with keys and a CORS origin, driven by libretranslatepy and urllib."""

import json
import logging
import urllib.error
import urllib.request

import pytest
from libretranslatepy import LibreTranslateAPI

from fconv_plugin.errors import FConvError
from fconv_plugin.serve.access import ApiKeys, RateLimited
from fconv_plugin.serve.requests import BadRequest
from tests.serve.server import Server


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_keys_and_limits_are_read_from_the_file(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("# team keys\nalpha 2\n\nbeta   # no limit\n")
    assert ApiKeys.read(str(path)).limits == {"alpha": 2, "beta": None}
    for text, problem in [("alpha two\n", "line 1: write a key, then optionally its requests per minute"),
                          ("alpha 0\n", "line 1"), ("a 1 2\n", "line 1"), ("x\n# c\nx 3\n", "line 3: the key is listed twice"),
                          ("# nothing\n", "holds no key")]:
        path.write_text(text)
        with pytest.raises(FConvError, match=problem):
            ApiKeys.read(str(path))
    with pytest.raises(FConvError, match="No such file"):
        ApiKeys.read(str(tmp_path / "missing.txt"))


def test_a_key_is_required_and_its_limit_counts_the_last_60_seconds():
    clock = Clock()
    keys = ApiKeys({"alpha": 2, "beta": None}, clock=clock)
    for key, message in [(None, "an API key is required"), ("", "an API key is required"), ("gamma", "Invalid API key")]:
        with pytest.raises(BadRequest, match=message) as refused:
            keys.admit(key)
        assert refused.value.status == 403
    keys.admit("alpha")
    clock.now += 20
    keys.admit("alpha")
    clock.now += 10
    with pytest.raises(RateLimited) as limited:  # 2 in the last 60 s: the first leaves the window in 30 s
        keys.admit("alpha")
    assert limited.value.status == 429 and limited.value.retry_after == 30
    clock.now += 30
    keys.admit("alpha")
    for _ in range(100):
        keys.admit("beta")


@pytest.mark.slow
def test_a_server_with_keys_and_one_cors_origin(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    keys = tmp_path / "keys.txt"
    keys.write_text("open-key\nslow-key 1\n")
    server = Server(data_bin, save_dir / "checkpoint_best.pt", "--api-keys", keys, "--cors-origin", "https://app.example",
                    log_path=tmp_path / "serve.log")
    try:
        assert server.translate(text="s1 s2")[0] == 403
        assert server.translate(text="s1 s2", api_key="wrong") == (403, {"error": "Invalid API key"})
        assert server.translate(text="s1 s2", api_key="open-key")[0] == 200
        assert LibreTranslateAPI(server.url, api_key="open-key").translate("s1 s2", "src", "tgt")
        with pytest.raises(urllib.error.HTTPError) as refused:
            LibreTranslateAPI(server.url).translate("s1 s2", "src", "tgt")
        assert refused.value.code == 403
        assert server.translate(text="s1", api_key="slow-key")[0] == 200
        status, answer = server.translate(text="s1", api_key="slow-key")
        assert status == 429 and "this API key's limit is reached" in answer["error"]

        def preflight(origin):
            request = urllib.request.Request(server.url + "/translate", method="OPTIONS", headers={
                "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    return answer.status, answer.headers.get("Access-Control-Allow-Origin")
            except urllib.error.HTTPError as error:
                return error.code, error.headers.get("Access-Control-Allow-Origin")

        assert preflight("https://app.example") == (200, "https://app.example")
        assert preflight("https://elsewhere.example")[1] is None
        # a key in the query string, as some LibreTranslate clients send it
        server.request("/translate?api_key=open-key&source=src", json.dumps({"q": "s1", "api_key": "open-key"}).encode())
    finally:
        server.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "/translate?api_key=[redacted]&source=src" in log  # the access log keeps the request, not the key
    assert "open-key" not in log and "slow-key" not in log


def test_keys_in_query_strings_never_reach_a_log(caplog):
    """uvicorn's access log formats (client, method, path with query, version, status); the
    filter fconv-serve gives every handler redacts keys first, in any spelling LibreTranslate
    clients use."""
    from uvicorn.logging import AccessFormatter

    from fconv_plugin.serve.access import RedactKeys
    from fconv_plugin.serve.main import _log_config_without_keys

    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "POST", "/translate?q=hi&api_key=team-a-4f9c2e&API-KEY=b;apikey=c",
                                "1.1", 200), None)
    assert RedactKeys().filter(record)
    line = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s').format(record)
    assert line == '127.0.0.1:5 - "POST /translate?q=hi&api_key=[redacted]&API-KEY=[redacted];apikey=[redacted] HTTP/1.1" 200 OK'
    import uvicorn.config

    config = _log_config_without_keys(uvicorn.config.LOGGING_CONFIG)
    assert all("redact_keys" in handler["filters"] for handler in config["handlers"].values())
    assert "filters" not in uvicorn.config.LOGGING_CONFIG["handlers"]["access"]  # uvicorn's own left as it was
