"""LibreTranslate's API, driven by its real Python client (libretranslatepy, from PyPI),
against fconv-serve on 127.0.0.1; each text's sentences are fairseq-interactive's."""

import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
from libretranslatepy import LibreTranslateAPI

from tests.tasks import interactive_answers
from tests.serve.test_server import _sentences

pytestmark = pytest.mark.slow


def _post(url, data: bytes, content_type: str):
    request = urllib.request.Request(url + "/translate", data=data, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_python_client_translates_sentences_and_paragraphs_and_lists_the_languages(served):
    server, data_bin, checkpoint = served
    client = LibreTranslateAPI(server.url)
    lines = _sentences(5, seed=21)
    expected = [answer["text"] for answer in interactive_answers(data_bin, checkpoint, lines)]
    assert client.translate(lines[0], "src", "tgt") == expected[0]
    # a paragraph of sentences and a second paragraph: split by the core, breaks kept
    text = f"{lines[1]}. {lines[2]}.\n\n{lines[3]}"
    translated = client.translate(text, "src", "tgt")
    paragraphs = translated.split("\n\n")
    assert len(paragraphs) == 2 and paragraphs[1] == expected[3]
    assert client.languages() == [{"code": "src", "name": "src", "targets": ["tgt"]}, {"code": "tgt", "name": "tgt", "targets": []}]


def test_json_lists_auto_detection_html_and_libretranslates_error_shapes(served):
    server, data_bin, checkpoint = served
    lines = _sentences(3, seed=22)
    expected = [answer["text"] for answer in interactive_answers(data_bin, checkpoint, lines)]
    body = json.dumps({"q": lines, "source": "src", "target": "tgt", "format": "text"}).encode()
    status, answer = _post(server.url, body, "application/json")
    assert status == 200 and answer == {"translatedText": expected}
    # auto: the identifier's most likely language for "s1 s2 ..." is none this server reads
    status, answer = _post(server.url, json.dumps({"q": lines, "source": "auto", "target": "tgt"}).encode(),
                           "application/json")
    assert status == 400 and re.fullmatch(r"\w+ is not supported \(detected with confidence [\d.]+\); "
                                          r"this server translates src-tgt", answer["error"]), answer
    # html: the markup kept, each text node translated, script left alone
    fragment = f'<p class="a">{lines[0]}</p><script>x = "{lines[1]}";</script><ul><li>{lines[2]}</li></ul>'
    status, answer = _post(server.url, json.dumps({"q": fragment, "source": "src", "target": "tgt", "format": "html"}).encode(),
                           "application/json")
    assert status == 200
    assert answer["translatedText"] == f'<p class="a">{expected[0]}</p><script>x = "{lines[1]}";</script><ul><li>{expected[2]}</li></ul>'
    # markup with no text in it comes back as it went, at once (no round waits for it)
    markup = ['<br/><img src="x.png">', f"<b>{lines[0]}</b>"]
    status, answer = _post(server.url, json.dumps({"q": markup, "source": "src", "target": "tgt", "format": "html"}).encode(),
                           "application/json")
    assert status == 200 and answer == {"translatedText": [markup[0], f"<b>{expected[0]}</b>"]}
    status, answer = _post(server.url, json.dumps({"q": markup[0], "source": "src", "target": "tgt", "format": "html"}).encode(),
                           "application/json")
    assert status == 200 and answer == {"translatedText": markup[0]}  # a job with no sentence at all
    status, answer = _post(server.url, json.dumps({"q": ["s1", ""], "source": "src", "target": "tgt"}).encode(),
                           "application/json")
    assert status == 400 and answer == {"error": "Invalid request: q holds an empty text (text 2)"}
    for fields, message in [({"q": "s1", "source": "src"}, "missing target parameter"),
                            ({"q": "s1", "source": "src", "target": "fr"}, "src to fr is not available"),
                            ({"q": "", "source": "src", "target": "tgt"}, "empty text"),
                            ({"q": "s1", "source": "src", "target": "tgt", "format": "pdf"}, "format 'pdf'")]:
        status, answer = _post(server.url, urllib.parse.urlencode(fields).encode(), "application/x-www-form-urlencoded")
        assert status == 400 and list(answer) == ["error"] and message in answer["error"], (fields, answer)
    status, answer = _post(server.url, b"q=s1", "multipart/form-data; boundary=x")  # no part in it
    assert status in (400, 422) and list(answer) == ["error"]
    status, answer = _post(server.url, b"q=s1", "text/plain")
    assert status == 415 and "url-encoded" in answer["error"]
