"""LibreTranslate's API beside the native one, so its clients (the web app, the Python
client ``libretranslatepy``, editor and browser plug-ins) can use fconv-serve.

    POST /translate  q (a string or a list), source, target, format (text | html), api_key
                     -> {"translatedText": "..."} (a list for a list), and with
                        source "auto" {"detectedLanguage": {"language", "confidence"}}
    GET /languages   -> [{"code", "name", "targets": [...]}, ...]
    errors           -> {"error": "..."} with 400 (bad fields), 403 (API key), 429, 500

A request is LibreTranslate's when it has ``q``, as JSON or as a url-encoded form.
Every text goes through the inference core's documents: paragraphs and line breaks
are kept and each line is split into sentences. With ``format: html`` the markup is
kept and only the text between tags is translated (not inside script or style).
"""

import html
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Dict, List, Optional, Tuple

from ..inference import Translation, Translator
from .batching import Job
from .requests import BadRequest, Item, Limits, check_size, item_translations, job_of, text_item

# names LibreTranslate's clients show; a code without one is shown as the code
LANGUAGE_NAMES = {
    "ar": "Arabic", "de": "German", "en": "English", "es": "Spanish", "fi": "Finnish", "fr": "French",
    "it": "Italian", "ja": "Japanese", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}
FIELDS = {"q", "source", "target", "format", "api_key", "alternatives"}
RAW_TEXT_TAGS = ("script", "style")


def is_libretranslate_request(fields: dict) -> bool:
    return "q" in fields


def language_list(translators: Dict[str, Translator]) -> List[dict]:
    targets: Dict[str, set] = {}
    for translator in translators.values():
        source, target = translator.languages
        if source and target:
            targets.setdefault(source, set()).add(target)
            targets.setdefault(target, set())
    return [{"code": code, "name": LANGUAGE_NAMES.get(code, code), "targets": sorted(targets[code])}
            for code in sorted(targets)]


def _model_for(translators: Dict[str, Translator], source: str, target: str) -> str:
    for name, translator in translators.items():
        model_source, model_target = translator.languages
        if model_target == target and source in (model_source, "auto"):
            return name
    pairs = ", ".join(f"{s}-{t}" for s, t in (t.languages for t in translators.values()) if s and t)
    raise BadRequest(400, f"{source} to {target} is not available; this server translates {pairs or 'no named pair'}")


@dataclass
class Shape:
    """How the answer is written back: a string or a list, html pieces, the detected language."""

    as_list: bool
    html_pieces: Optional[List[List[Tuple[bool, str]]]]  # per text: (is text to translate, raw piece)
    detected: Optional[str]


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


def parse_libretranslate_request(fields: dict, translators: Dict[str, Translator], limits: Limits) -> Tuple[Job, Shape]:
    unknown = sorted(set(fields) - FIELDS)
    if unknown:
        raise BadRequest(400, f"Invalid request: unknown parameter {unknown[0]!r}; the parameters are "
                              "q, source, target, format, api_key, alternatives")
    for name in ("source", "target"):
        if not isinstance(fields.get(name), str) or not fields[name]:
            raise BadRequest(400, f"Invalid request: missing {name} parameter")
    text_format = fields.get("format", "text")
    if text_format not in ("text", "html"):
        raise BadRequest(400, f"Invalid request: format {text_format!r}; give text or html")
    if str(fields.get("alternatives", 0)) not in ("0", ""):
        raise BadRequest(400, "Invalid request: alternatives are not offered; leave alternatives at 0")
    q = fields["q"]
    as_list = isinstance(q, list)
    texts = q if as_list else [q]
    if not texts or not all(isinstance(text, str) for text in texts):
        raise BadRequest(400, "Invalid request: q must be a text or a list of texts")
    if not all(text.strip() for text in texts):
        raise BadRequest(400, "Invalid request: q holds an empty text")
    check_size(texts, limits)
    model = _model_for(translators, fields["source"], fields["target"])
    translator = translators[model]
    pieces = [html_pieces(text) for text in texts] if text_format == "html" else None
    items: List[Item] = []
    for number, text in enumerate(texts, start=1):
        where = f"text {number}" if len(texts) > 1 else "the text"
        parts = [part for translate, part in pieces[number - 1] if translate] if pieces else [text]
        items += [text_item(translator, part.strip(), where, as_document=True) for part in parts]
    job = job_of(model, items, translator.defaults.beam, limits)
    detected = translator.languages[0] if fields["source"] == "auto" else None
    return job, Shape(as_list, pieces, detected)


def libretranslate_answer(shape: Shape, job: Job, translations: List[Translation]) -> dict:
    # one document per text (or per html text piece)
    texts = [item.document.assemble(mine).text for item, mine in item_translations(job, translations)]
    if shape.html_pieces is not None:
        rebuilt, translated = [], iter(texts)
        for pieces in shape.html_pieces:
            out = []
            for translate, raw in pieces:
                if translate:  # keep the text node's own leading and trailing spaces
                    lead, trail = raw[: len(raw) - len(raw.lstrip())], raw[len(raw.rstrip()):]
                    out.append(lead + html.escape(next(translated), quote=False) + trail)
                else:
                    out.append(raw)
            rebuilt.append("".join(out))
        texts = rebuilt
    answer = {"translatedText": texts if shape.as_list else texts[0]}
    if shape.detected is not None:
        answer["detectedLanguage"] = {"language": shape.detected, "confidence": 100.0}
    return answer
