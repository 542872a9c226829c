"""What a translation request asks for, checked, and what its answer says: the native API.

A request's JSON becomes a ``TranslationRequest`` (a ``batching.Job`` of the checked
sentences the model reads with the request's one ``TranslationOptions``, and the request's
texts they make up, ``RequestText``), or ``BadRequest`` naming the first problem; the job's
translations become the answer's JSON. The service (``service.py``)
runs the job; the HTTP side is ``app.py``; LibreTranslate's API is ``libretranslate.py``.
"""

import json
from dataclasses import dataclass
from typing import Dict, List, Optional
from urllib.parse import parse_qsl

from ..errors import EmptySentence, TooLong
from ..inference import SplitDocument, Translation, TranslationOptions, Translator
from ..inference.documents import checked_document
from ..inference.text_codec import CheckedSentence
from .batching import Job
from .served import ServedModels


@dataclass
class Limits:
    max_body_bytes: int = 65536
    max_request_sentences: int = 64  # texts in one request; a document's sentences are queued in parts of this many
    max_beam: int = 20
    timeout: float = 30.0  # seconds a part of a request may wait for its translation
    max_characters: int = 50000  # in all the texts of one request


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def bad_request_for(error, empty: str = None) -> BadRequest:
    """The core's check of a text (``EmptySentence``, ``TooLong``) as the native API answers it:
    422 "sentence 2 is empty" (or ``empty``, a protocol's own wording), 413 with what to do."""
    if isinstance(error, EmptySentence):
        return BadRequest(422 if empty is None else 400, str(error) if empty is None else empty)
    if error.word:  # a single "word" of a document longer than the model reads
        return BadRequest(413, f"{error.where} has a word of {error.count} tokens; the model reads at most {error.limit}")
    return BadRequest(413, f"{error.where} has {error.count} tokens; the model reads at most {error.limit}; "
                           'split it, or send "document": true to have it split into sentences')


def read_request(body: bytes, content_type: str, query=(), form=None) -> dict:
    """The request's fields, in every encoding LibreTranslate reads: a JSON object (its
    body alone, as LibreTranslate reads a JSON request; a body without a content type is
    taken for JSON), or fields from the query string and a url-encoded or multipart form
    (``form``: its (name, value) pairs, parsed by the caller), the query string's first
    where a field comes twice (LibreTranslate's ``request.values``). Repeated ``q`` is a
    list. BadRequest for anything else."""
    if form is None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadRequest(400, f"the body is not valid UTF-8 (byte {body[e.start]:#04x} at offset {e.start})") from None
    media_type = content_type.split(";")[0].strip().lower()
    if form is None and media_type == "application/x-www-form-urlencoded":
        form = parse_qsl(text, keep_blank_values=True)
    elif form is None and text.strip():
        if media_type not in ("", "application/json") and not media_type.endswith("+json"):
            raise BadRequest(415, f"the body is {media_type}; send JSON, a url-encoded form or a multipart form")
        try:
            request = json.loads(text)
        except json.JSONDecodeError as e:
            raise BadRequest(400, f"the body is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        if not isinstance(request, dict):
            raise BadRequest(422, 'the body must be a JSON object such as {"text": "a sentence"}')
        return request
    fields = _fields_of(form or [])
    fields.update(_fields_of(query))
    return fields


def _fields_of(pairs) -> Dict[str, object]:
    values: Dict[str, List[str]] = {}
    for name, value in pairs:
        values.setdefault(name, []).append(value)
    return {name: found if name == "q" and len(found) > 1 else found[0] for name, found in values.items()}


def parse_translate_request(request: dict, served: ServedModels, limits: Limits) -> "TranslationRequest":
    """The native API's request as what it asks, or BadRequest naming the first problem."""
    unknown = sorted(set(request) - {"text", "beam", "alignment", "attention", "model", "document"})
    if unknown:
        raise BadRequest(422, f"unknown field {unknown[0]!r}; the fields are text, beam, alignment, attention, model, document")
    if "text" not in request:
        raise BadRequest(422, 'missing "text": give a text (a sentence or a document) or a list of them')
    lines = request["text"]
    if isinstance(lines, str):
        lines = [lines]
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise BadRequest(422, '"text" must be a string or a list of strings')
    if not lines:
        raise BadRequest(422, '"text" is an empty list; give at least one sentence')
    check_size(lines, limits)
    model = request.get("model", served.default)
    if not isinstance(model, str):
        raise BadRequest(422, f'"model" must be a model\'s name, got {json.dumps(model)}')
    if model not in served.translators:
        raise BadRequest(404, f"no model named {model!r}; GET /models lists them")
    translator = served.translators[model]
    beam = request.get("beam", translator.defaults.beam)
    if type(beam) is not int or not 1 <= beam <= limits.max_beam:
        raise BadRequest(422, f'"beam" must be a whole number from 1 to {limits.max_beam}, got {json.dumps(beam)}')
    flags = {}
    for flag in ("alignment", "attention", "document"):
        flags[flag] = request.get(flag, False)
        if type(flags[flag]) is not bool:
            raise BadRequest(422, f'"{flag}" must be true or false, got {json.dumps(flags[flag])}')
    as_document = flags.pop("document")
    options = TranslationOptions.asked(translator.defaults, beam=beam, nbest=1, **flags)  # one answer a text
    texts = [request_text(translator, text.strip(), f"sentence {number}" if len(lines) > 1 else "the sentence",
                          as_document) for number, text in enumerate(lines, start=1)]
    return translation_request(model, texts, options)


def check_size(texts: List[str], limits: Limits, count_texts: bool = True) -> None:
    """413 for more texts than --max-request-sentences (unless ``count_texts`` is False: a
    file's) or more characters than --max-request-characters; a document's sentences are
    not capped (they are queued in parts)."""
    if count_texts and len(texts) > limits.max_request_sentences:
        raise BadRequest(413, f"{len(texts)} sentences in one request; the limit is {limits.max_request_sentences} (--max-request-sentences); "
                              "send a document as one text")
    characters = sum(len(text) for text in texts)
    if characters > limits.max_characters:
        raise BadRequest(413, f"{characters} characters in one request; the limit is {limits.max_characters} "
                              "(--max-request-characters); send the text in parts")


def translation_request(model: str, texts: List["RequestText"], options: TranslationOptions) -> "TranslationRequest":
    """The job that translates every piece of ``texts`` with ``options``, with the texts."""
    return TranslationRequest(Job(model, [piece for text in texts for piece in text.pieces], options), texts)


def text_translations(request: "TranslationRequest", translations: List[Translation]):
    """(text, its pieces' translations) for each text of the request, in order."""
    start = 0
    for text in request.texts:
        yield text, translations[start: start + len(text.pieces)]
        start += len(text.pieces)


def request_text(translator: Translator, text: str, where: str, as_document: bool, empty: str = None) -> "RequestText":
    """One text of a request: a sentence, translated whole as fairseq-interactive translates
    a line; or, with ``"document": true`` or line breaks in it, a document (paragraphs and
    lines kept, split into sentences, long ones at safe points: ``inference.documents``).
    The core checks it, once (``Translator.checked_sentence``, ``checked_document``); its
    errors are answered by ``bad_request_for`` (``empty``: a protocol's own words for an
    empty text)."""
    try:
        if not as_document and "\n" not in text and "\r" not in text:
            return RequestText(None, [translator.checked_sentence(text, where)])
        document = checked_document(translator, text.replace("\r\n", "\n"), where)
    except (EmptySentence, TooLong) as error:
        raise bad_request_for(error, empty) from None
    return RequestText(document, document.pieces)


@dataclass
class RequestText:
    """One text of a request and the checked pieces the model reads of it."""

    document: Optional[SplitDocument]  # None: one sentence
    pieces: List[CheckedSentence]


@dataclass
class TranslationRequest:
    """A translation request as read: the job the batcher runs, and the request's texts
    (``RequestText``) its sentences make up, which turn its translations back into the answer."""

    job: Job
    texts: List[RequestText]


def _hypothesis_answer(translation: Translation, alignment: bool, attention: bool) -> dict:
    best = translation.best
    answer = {"text": best.text, "score": best.score}
    if alignment:
        answer["alignment"] = [[s, t] for s, t in best.alignment]
    if attention and best.attention is None:  # a line without a word, passed through: nothing was decoded
        answer["attention"] = None
    elif attention:
        answer["attention"] = {
            "source": best.attention.source,
            "target": best.attention.target,
            "layers": [[[round(w, 4) for w in row] for row in layer] for layer in best.attention.layers],
        }
        if best.p_gen is not None:
            answer["p_gen"] = [round(p, 4) for p in best.p_gen]
    return answer


def answers(request: TranslationRequest, translations: List[Translation]) -> List[dict]:
    """One answer per text of the request: a sentence's, or a document's text with its sentences'."""
    options = request.job.options
    out = []
    for text, mine in text_translations(request, translations):
        if text.document is None:
            out.append(_hypothesis_answer(mine[0], options.alignment, options.attention))
            continue
        sentences = [_hypothesis_answer(t, options.alignment, options.attention) for t in mine]
        out.append({
            "text": text.document.assemble(mine).text,
            "score": sum(s["score"] for s in sentences) / len(sentences) if sentences else 0.0,
            "sentences": sentences,
        })
    return out
