"""LibreTranslate's API beside the native one, so its clients (the web app, the Python
clients libretranslatepy, deep-translator and libretranslate-aio, editor and browser
plug-ins) can use fconv-serve unchanged.

    POST /translate       q (a string or a list), source (a code or auto), target, format
                          (text | html), alternatives, api_key
                          -> {"translatedText": "..."} (a list for a list), "alternatives"
                             when asked for, "detectedLanguage" for source auto
    POST /detect          q -> [{"language", "confidence" (0-100)}, ...]
    POST /translate_file  file (.txt, .html, .docx), source, target -> {"translatedFileUrl"}
    GET /download_file/N  the translated file
    GET /languages        [{"code", "name", "targets": [...]}, ...]
    GET /frontend/settings  the limits, keys setting, file formats and languages
    errors                {"error": "..."} with 400 (bad fields), 403 (API key), 404, 413, 429, 500

Fields come as JSON, a url-encoded or multipart form, or the query string
(``requests.read_request``); a /translate request is LibreTranslate's when it has ``q``.
Every text goes through the inference core's documents: paragraphs and line breaks
are kept and each line is split into sentences. With ``format: html`` the markup is
kept and only the text between tags is translated (not inside script or style).
"""

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import List, Optional, Tuple

from ..inference import Translation, TranslationOptions
from . import language_id
from .requests import (BadRequest, Limits, RequestText, TranslationRequest, check_size, request_text, text_translations,
                       translation_request)
from .served import LANGUAGE_NAMES, ServedModels
FIELDS = {"q", "source", "target", "format", "api_key", "alternatives"}
EMPTY = "Invalid request: q holds an empty text"  # LibreTranslate's words for the core's EmptySentence
RAW_TEXT_TAGS = ("script", "style")


def is_libretranslate_request(fields: dict) -> bool:
    return "q" in fields


def model_for(served: ServedModels, source: str, target: str) -> str:
    """The model for the pair, or LibreTranslate's 400 naming the pairs served."""
    model = served.model_for(source, target)
    if model is None:
        raise BadRequest(400, f"{source} to {target} is not available; this server translates {served.named_pairs()}")
    return model


def detect_answer(fields: dict, served: ServedModels) -> List[dict]:
    """POST /detect: the served source languages, most likely first (``language_id``)."""
    q = fields.get("q")
    if not isinstance(q, str) or not q.strip():
        raise BadRequest(400, "Invalid request: missing q parameter")
    return language_id.detections(q, served.sources)


def detected_source(texts: List[str], target: str, served: ServedModels) -> Tuple[str, float]:
    """``source: auto``: the language the texts are most likely in, over every language the
    identifier knows; LibreTranslate's error where no served model reads it into ``target``."""
    code, confidence = language_id.most_likely("\n".join(texts))
    if served.model_for(code, target) is None:
        raise BadRequest(400, f"{code} is not supported (detected with confidence {confidence:g}); "
                              f"this server translates {served.named_pairs()}")
    return code, confidence


@dataclass
class AnswerForm:
    """How the answer is written back: a string or a list, html pieces, the detected language."""

    as_list: bool
    html_pieces: Optional[List[List[Tuple[bool, str]]]]  # per text: (is text to translate, raw piece)
    detected: Optional[Tuple[str, float]]  # (language, confidence) for source auto
    alternatives: int = 0


class _MarkupSplitter(HTMLParser):
    """A HTML fragment as pieces: (True, text to translate) or (False, markup kept as it is)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.pieces: List[Tuple[bool, str]] = []
        self._raw_depth = 0  # inside script or style

    def handle_starttag(self, tag, attrs):
        self.pieces.append((False, self.get_starttag_text()))
        if tag in RAW_TEXT_TAGS:
            self._raw_depth += 1

    def handle_startendtag(self, tag, attrs):
        self.pieces.append((False, self.get_starttag_text()))

    def handle_endtag(self, tag):
        self.pieces.append((False, f"</{tag}>"))
        if tag in RAW_TEXT_TAGS and self._raw_depth > 0:
            self._raw_depth -= 1

    def handle_data(self, data):
        if self._raw_depth:  # script or style: as it came
            self.pieces.append((False, data))
        elif data.strip():
            self.pieces.append((True, data))  # unescaped text; its translation is escaped again
        else:
            self.pieces.append((False, data))

    def handle_comment(self, data):
        self.pieces.append((False, f"<!--{data}-->"))

    def handle_decl(self, decl):
        self.pieces.append((False, f"<!{decl}>"))

    def handle_pi(self, data):
        self.pieces.append((False, f"<?{data}>"))


def html_pieces(fragment: str) -> List[Tuple[bool, str]]:
    splitter = _MarkupSplitter()
    splitter.feed(fragment)
    splitter.close()
    return splitter.pieces


def rebuild_html(pieces: List[Tuple[bool, str]], translated) -> str:
    """The fragment of ``pieces`` with each text piece replaced by the next of ``translated``
    (escaped again), the text node's own leading and trailing spaces kept."""
    out = []
    for translate, raw in pieces:
        if translate:
            lead, trail = raw[: len(raw) - len(raw.lstrip())], raw[len(raw.rstrip()):]
            out.append(lead + html.escape(next(translated), quote=False) + trail)
        else:
            out.append(raw)
    return "".join(out)


def parse_libretranslate_request(fields: dict, served: ServedModels, limits: Limits) -> Tuple[TranslationRequest, AnswerForm]:
    unknown = sorted(set(fields) - FIELDS)
    if unknown:
        raise BadRequest(400, f"Invalid request: unknown parameter {unknown[0]!r}; the parameters are "
                              "q, source, target, format, api_key, alternatives")
    for name in ("source", "target"):
        if not isinstance(fields.get(name), str) or not fields[name]:
            raise BadRequest(400, f"Invalid request: missing {name} parameter")
    text_format = fields.get("format") or "text"
    if text_format not in ("text", "html"):
        raise BadRequest(400, f"Invalid request: format {text_format!r}; give text or html")
    alternatives = str(fields.get("alternatives", 0)).strip() or "0"
    if not re.fullmatch(r"[0-9]{1,6}", alternatives):  # ASCII digits (str.isdigit takes "²", int() does not)
        raise BadRequest(400, f"Invalid request: alternatives {fields['alternatives']!r}; give a whole number")
    alternatives = int(alternatives)
    if alternatives and text_format == "html":
        raise BadRequest(400, "Invalid request: alternatives are given for format text only")
    q = fields["q"]
    as_list = isinstance(q, list)
    texts = q if as_list else [q]
    if not texts or not all(isinstance(text, str) for text in texts):
        raise BadRequest(400, "Invalid request: q must be a text or a list of texts")
    check_size(texts, limits)
    detected = detected_source(texts, fields["target"], served) if fields["source"] == "auto" else None
    model = model_for(served, detected[0] if detected else fields["source"], fields["target"])
    translator = served.translators[model]
    beam = translator.defaults.beam
    if alternatives > beam - 1:
        raise BadRequest(400, f"Invalid request: {alternatives} alternatives; this server's beam of {beam} (--beam) "
                              f"gives at most {beam - 1}")
    pieces = [html_pieces(text) for text in texts] if text_format == "html" else None
    request_texts: List[RequestText] = []
    for number, text in enumerate(texts, start=1):
        where = f"text {number}" if len(texts) > 1 else "the text"
        parts = [part for translate, part in pieces[number - 1] if translate] if pieces and text.strip() else [text]
        empty = EMPTY if len(texts) == 1 else f"{EMPTY} (text {number})"
        request_texts += [request_text(translator, part.strip(), where, True, empty=empty) for part in parts]
    options = TranslationOptions.asked(translator.defaults, nbest=alternatives + 1)
    return translation_request(model, request_texts, options), AnswerForm(as_list, pieces, detected, alternatives)


def _alternatives(text: RequestText, mine: List[Translation], count: int) -> List[str]:
    """Up to ``count`` further distinct texts of one document: the k-th hypothesis of each
    of its sentences (its best where a sentence has fewer), k = 2, 3, ..."""
    best = text.document.assemble(mine).text
    found: List[str] = []
    for k in range(1, max((len(t.hypotheses) for t in mine), default=1)):
        alternative = text.document.assemble([Translation(t.source, [t.hypotheses[min(k, len(t.hypotheses) - 1)]])
                                              for t in mine]).text
        if alternative != best and alternative not in found:
            found.append(alternative)
    return found[:count]


def libretranslate_answer(form: AnswerForm, request: TranslationRequest, translations: List[Translation]) -> dict:
    # one document per text (or per html text piece)
    documents = list(text_translations(request, translations))
    texts = [text.document.assemble(mine).text for text, mine in documents]
    if form.html_pieces is not None:
        translated = iter(texts)
        texts = [rebuild_html(pieces, translated) for pieces in form.html_pieces]
    answer = {"translatedText": texts if form.as_list else texts[0]}
    if form.alternatives:
        alternatives = [_alternatives(text, mine, form.alternatives) for text, mine in documents]
        answer["alternatives"] = alternatives if form.as_list else alternatives[0]
    if form.detected is not None:
        detected = {"language": form.detected[0], "confidence": form.detected[1]}
        answer["detectedLanguage"] = [detected] * len(texts) if form.as_list else detected
    return answer


def frontend_settings(served: ServedModels, limits: Limits, keys_required: bool, file_formats: List[str]) -> dict:
    """GET /frontend/settings in LibreTranslate's shape, from the server's own limits."""
    first = served.first_pair
    source = {"code": "auto", "name": "Auto Detect"} if language_id.known(served.sources) else \
        {"code": first[0] or "", "name": LANGUAGE_NAMES.get(first[0], first[0] or "")}
    return {
        "charLimit": limits.max_characters,
        "frontendTimeout": 500,
        "apiKeys": keys_required,
        "keyRequired": keys_required,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": file_formats,
        "language": {"source": source,
                     "target": {"code": first[1] or "", "name": LANGUAGE_NAMES.get(first[1], first[1] or "")}},
    }
