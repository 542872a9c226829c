"""Issue 54: LibreTranslate's clients work unchanged against fconv-serve, on a real
Spanish-English quickstart run (a few updates) behind a real server on 127.0.0.1:
deep-translator, libretranslatepy and libretranslate-aio; every encoding LibreTranslate
reads; /detect; /translate_file with .txt, .html and .docx; alternatives; and
/frontend/settings. What each text becomes is the server's own answer to the same text
as JSON (tests/serve/test_libretranslate.py holds those to fairseq-interactive's)."""

import io
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.serve.server import Server

pytestmark = pytest.mark.slow

VERSES = ["Y dijo Dios: Sea la luz: y fué la luz.", "En el principio crió Dios los cielos y la tierra.",
          "Y vió Dios que la luz era buena."]


@pytest.fixture(scope="module")
def spanish(quickstart_run, tmp_path_factory):
    server = Server(quickstart_run / "data-bin", quickstart_run / "checkpoints" / "checkpoint_best.pt",
                    "--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", quickstart_run / "codes",
                    "--beam", "5", log_path=tmp_path_factory.mktemp("serve_es") / "serve.log")
    yield server
    server.stop()


def _call(server, path, data=None, content_type=None, query=None):
    url = server.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
    request = urllib.request.Request(url, data=data, method="POST" if data is not None or query else "GET",
                                     headers={"Content-Type": content_type} if content_type else {})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _json(server, fields):
    status, body = _call(server, "/translate", json.dumps(fields).encode(), "application/json")
    assert status == 200, body
    return json.loads(body)


def _multipart(fields, files=()):
    boundary = "fconv-test-boundary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
             for name, value in fields]
    parts += [f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
              f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n" for name, filename, data in files]
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_deep_translator_translates_and_translates_batches(spanish):
    from deep_translator import LibreTranslator

    expected = [_json(spanish, {"q": verse, "source": "es", "target": "en"})["translatedText"] for verse in VERSES]
    client = LibreTranslator(source="es", target="en", api_key="unused", custom_url=spanish.url + "/")
    assert client.translate(VERSES[0]) == expected[0]  # its fields come in the query string, with no body
    assert client.translate_batch(VERSES) == expected
    assert LibreTranslator(source="auto", target="en", api_key="unused", custom_url=spanish.url + "/").translate(
        VERSES[1]) == expected[1]


def test_libretranslatepy_translates_detects_and_lists_the_languages(spanish):
    from libretranslatepy import LibreTranslateAPI

    client = LibreTranslateAPI(spanish.url + "/")
    assert client.translate(VERSES[0], "es", "en") == _json(spanish, {"q": VERSES[0], "source": "es", "target": "en"})[
        "translatedText"]
    (detected,) = client.detect(VERSES[1])
    assert detected["language"] == "es" and 50 < detected["confidence"] <= 100
    assert client.languages() == [{"code": "en", "name": "English", "targets": []},
                                  {"code": "es", "name": "Spanish", "targets": ["en"]}]


def test_libretranslate_aio_sync_and_async_with_alternatives_settings_and_a_file(spanish, tmp_path):
    import asyncio

    from libretranslate_aio import AsyncLibreTranslate, LibreTranslate

    expected = _json(spanish, {"q": VERSES[0], "source": "es", "target": "en", "alternatives": 3})
    with LibreTranslate(base_url=spanish.url) as client:
        translation = client.translate(VERSES[0], "es", "en", alternatives=3)
        assert translation.translated_text == expected["translatedText"]
        assert translation.alternatives == expected["alternatives"]
        batch = client.translate(VERSES, "auto", "en")
        assert [d.language for d in batch.detected_language] == ["es"] * 3
        settings = client.frontend_settings()
        assert (settings.char_limit, settings.key_required) == (50000, False)
        assert settings.supported_files_format == [".txt", ".html", ".docx"]
        assert (settings.language.source.code, settings.language.target.code) == ("auto", "en")
        source = tmp_path / "chapter.txt"
        source.write_text(f"{VERSES[0]}\n\n{VERSES[1]} {VERSES[2]}\n", encoding="utf-8")
        url = client.translate_file(source, source="es", target="en").translated_file_url
    with urllib.request.urlopen(url, timeout=60) as answer:
        translated = answer.read().decode("utf-8")
    assert translated == _json(spanish, {"q": source.read_text(encoding="utf-8"), "source": "es", "target": "en"})[
        "translatedText"] + "\n"  # q is stripped; the file keeps its last line break

    async def detect():
        async with AsyncLibreTranslate(base_url=spanish.url) as client:
            return await client.detect(VERSES[2]), await client.translate(VERSES[2], "es", "en")

    detections, translation = asyncio.run(detect())
    assert detections[0].language == "es"
    assert translation.translated_text == _json(spanish, {"q": VERSES[2], "source": "es", "target": "en"})["translatedText"]


def test_every_encoding_gives_the_json_answer_and_the_query_string_comes_first(spanish):
    expected = _json(spanish, {"q": VERSES[0], "source": "es", "target": "en"})
    form = urllib.parse.urlencode({"q": VERSES[0], "source": "es", "target": "en"}).encode()
    assert json.loads(_call(spanish, "/translate", form, "application/x-www-form-urlencoded")[1]) == expected
    body, content_type = _multipart([("q", VERSES[0]), ("source", "es"), ("target", "en")])
    assert json.loads(_call(spanish, "/translate", body, content_type)[1]) == expected
    assert json.loads(_call(spanish, "/translate", query={"q": VERSES[0], "source": "es", "target": "en"})[1]) == expected
    # a field in both the query string and the form: the query string's (LibreTranslate's request.values)
    status, answer = _call(spanish, "/translate?target=fr", form, "application/x-www-form-urlencoded")
    assert status == 400 and "es to fr is not available" in json.loads(answer)["error"]
    # bad input keeps its one-line errors, in LibreTranslate's shape
    status, answer = _call(spanish, "/detect", b"{}", "application/json")
    assert (status, json.loads(answer)) == (400, {"error": "Invalid request: missing q parameter"})
    status, answer = _call(spanish, "/translate", json.dumps({"q": VERSES[0], "source": "es", "target": "en",
                                                               "alternatives": 5}).encode(), "application/json")
    assert status == 400 and "beam of 5 (--beam) gives at most 4" in json.loads(answer)["error"]
    status, answer = _call(spanish, "/translate", json.dumps({"q": "The Lord is my shepherd and I shall not want.",
                                                               "source": "auto", "target": "en"}).encode(), "application/json")
    assert status == 400 and json.loads(answer)["error"].startswith("en is not supported")


def test_alternatives_are_distinct_hypotheses_of_the_same_beam(spanish):
    answer = _json(spanish, {"q": VERSES[1], "source": "es", "target": "en", "alternatives": 4})
    alternatives = answer["alternatives"]
    assert 1 <= len(alternatives) <= 4 and len(set(alternatives)) == len(alternatives)
    assert answer["translatedText"] not in alternatives
    native = json.loads(_call(spanish, "/translate", json.dumps({"text": VERSES[1], "beam": 5}).encode(),
                              "application/json")[1])["translations"][0]
    assert answer["translatedText"] == native["text"]


def _docx_bytes():
    import docx

    document = docx.Document()
    paragraph = document.add_paragraph()
    bold = paragraph.add_run(VERSES[0])
    bold.bold = True
    paragraph.add_run(" " + VERSES[1])
    document.add_paragraph(VERSES[2], style="Heading 1")
    table = document.add_table(rows=1, cols=1)
    table.cell(0, 0).text = VERSES[1]
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _translate_file(server, filename, data, source="es"):
    body, content_type = _multipart([("source", source), ("target", "en")], [("file", filename, data)])
    status, answer = _call(server, "/translate_file", body, content_type)
    assert status == 200, answer
    url = json.loads(answer)["translatedFileUrl"]
    assert url.startswith(server.url + "/download_file/")
    with urllib.request.urlopen(url, timeout=60) as translated:
        return translated.read(), url


def test_translate_file_round_trips_txt_html_and_docx(spanish):
    import docx

    text = f"{VERSES[0]}\n{VERSES[1]}\n\n{VERSES[2]}\n"
    translated, _ = _translate_file(spanish, "chapter.txt", text.encode())
    lines = translated.decode().split("\n")
    assert len(lines) == 5 and lines[2] == "" and lines[4] == ""
    page = f'<html><body><h1 class="t">{VERSES[0]}</h1><p>{VERSES[1]}</p><script>var x = "{VERSES[2]}";</script></body></html>'
    translated, _ = _translate_file(spanish, "page.html", page.encode(), source="auto")
    expected = _json(spanish, {"q": page, "source": "es", "target": "en", "format": "html"})["translatedText"]
    assert translated.decode() == expected and f'var x = "{VERSES[2]}"' in expected
    translated, url = _translate_file(spanish, "letter.docx", _docx_bytes())
    document = docx.Document(io.BytesIO(translated))
    paragraphs = [p for p in document.paragraphs]
    assert len(paragraphs) == 2 and len(paragraphs[0].runs) == 2
    assert paragraphs[0].runs[0].bold and not paragraphs[0].runs[1].bold
    assert paragraphs[1].style.name == "Heading 1"
    runs = [paragraphs[0].runs[0].text, paragraphs[0].runs[1].text.strip(), paragraphs[1].text, document.tables[0].cell(0, 0).text]
    assert runs == [_json(spanish, {"q": v, "source": "es", "target": "en"})["translatedText"]
                    for v in (VERSES[0], VERSES[1], VERSES[2], VERSES[1])]
    # names that are not the server's, or reach outside its directory: 404 in the error shape
    for name in ("nothing.txt", "..%2F..%2Fetc%2Fpasswd", url.rsplit("/", 1)[1].replace(".docx", ".txt")):
        status, answer = _call(spanish, "/download_file/" + name)
        assert status == 404 and list(json.loads(answer)) == ["error"]
    body, content_type = _multipart([("source", "es"), ("target", "en")], [("file", "slides.pdf", b"%PDF")])
    status, answer = _call(spanish, "/translate_file", body, content_type)
    assert status == 400 and "file format .pdf not supported" in json.loads(answer)["error"]
    body, content_type = _multipart([("source", "es"), ("target", "en")], [("file", "letter.docx", b"not a zip")])
    status, answer = _call(spanish, "/translate_file", body, content_type)
    assert status == 400 and json.loads(answer)["error"].startswith("Invalid request: not a readable .docx document")


def test_translated_files_are_deleted_after_their_time_and_count(tmp_path):
    from fconv_plugin.serve.files import TranslatedFiles

    files = TranslatedFiles(str(tmp_path), max_files=2, max_age=3600)
    names = [files.keep(f"file {i}".encode(), ".txt") for i in range(3)]
    assert len(set(names)) == 3 and all(len(name) == 36 for name in names)
    assert files.path(names[0]) is None and files.path(names[2]).read_bytes() == b"file 2"
    files.max_age = 0
    assert files.path(names[2]) is None and sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("alternatives", ["²", "-1", "1.5", "true", "9999999"])
def test_alternatives_that_are_no_small_whole_number_get_a_400(spanish, alternatives):
    form = urllib.parse.urlencode({"q": VERSES[0], "source": "es", "target": "en", "alternatives": alternatives}).encode()
    status, answer = _call(spanish, "/translate", form, "application/x-www-form-urlencoded")
    assert status == 400 and list(json.loads(answer)) == ["error"]
