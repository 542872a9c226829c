"""Whole documents: paragraphs and lines kept, sentences found, over-long ones split, all batched.

A document is split into lines (blank lines separate paragraphs and are kept as they
are), each line into sentences by ``sentencex`` (Wikimedia's segmenter, maintained,
with per-language rules for ~300 languages and a fallback chain for the rest, so
"Sr. García" or "3 p.m." do not end a sentence), and a sentence the model cannot read
whole into pieces at the safest points there are: after ; or :, then after a comma,
then between words. Every sentence of the document goes to the model in one
``Translator.translate`` call, batched by tokens as fairseq batches them; each line is
put back from its sentences' translations, with its indentation, and the lines with
the document's own line breaks.
"""

import functools
import re
from dataclasses import dataclass
from typing import Callable, List, Optional

from ..errors import EmptySentence, FConvError
from .options import TranslationOptions
from .results import DocumentTranslation, Translation
from .text_codec import CheckedSentence, checked_sentence

CLAUSE_END = re.compile(r"[;:]$")
PHRASE_END = re.compile(r"[,)\]»”\"'–—-]$")


MIN_CUT = 2  # a piece of one word and </s>


def cut_length(asked: Optional[int], source_limit: Optional[int], otherwise: Optional[int] = None) -> Optional[int]:
    """The longest piece (source tokens with </s>) a document's sentence is cut into: the
    one place of its rule and its clamp. ``asked`` (--max-sentence-tokens, ``Translator``'s
    ``sentence_cut``), if given, must be at least 2, else ``otherwise`` (the translator's
    trained cut) is taken; either is kept within what the model reads (``source_limit``).
    With ``source_limit`` None only the rule is checked (before a model is loaded)."""
    if asked is not None and asked < MIN_CUT:
        raise FConvError(f"--max-sentence-tokens must be at least {MIN_CUT}, got {asked}")
    if source_limit is None:
        return None
    return max(MIN_CUT, min(asked if asked is not None else otherwise, source_limit))


def split_sentences(line: str, language: Optional[str]) -> List[str]:
    """The sentences of one line of text, stripped."""
    from sentencex import segment

    return [sentence.strip() for sentence in segment(language or "en", line) if sentence.strip()]


def split_long_sentence(sentence: str, fits: Callable[[str], bool]) -> List[str]:
    """``sentence`` in consecutive pieces that each ``fits``, cut at the safest points:
    after a clause (; :), after a phrase (, and closing marks), else between words.

    A single word that does not fit stays a piece of its own (the model then refuses it
    by name)."""
    if fits(sentence):
        return [sentence]
    words = sentence.split()
    if len(words) == 1:
        return [sentence]
    cut = _best_cut(words, fits)
    return split_long_sentence(" ".join(words[:cut]), fits) + split_long_sentence(" ".join(words[cut:]), fits)


def _best_cut(words: List[str], fits: Callable[[str], bool]) -> int:
    """Where to cut ``words``: the last clause end, else phrase end, else word, whose left
    side fits, so the first piece is as long as it can be; at least one word each side."""
    longest = 1  # how many words fit on the left, found by bisection
    low, high = 1, len(words) - 1
    while low <= high:
        middle = (low + high) // 2
        if fits(" ".join(words[:middle])):
            longest, low = middle, middle + 1
        else:
            high = middle - 1
    for boundary in (CLAUSE_END, PHRASE_END):
        # a cut early on would leave the first piece short: only take one past a third
        for cut in range(longest, longest // 3, -1):
            if boundary.search(words[cut - 1]):
                return cut
    return longest


@dataclass
class _Line:
    indent: str
    first: int  # index of its first sentence piece
    count: int  # how many pieces
    ending: str  # "\r" for CRLF documents, else ""


@dataclass
class SplitDocument:
    """A document in the pieces the model reads, and how to put their translations back."""

    text: str
    pieces: List[CheckedSentence]  # sentences, and pieces of over-long ones, in document order, each checked
    lines: List[Optional[_Line]]  # one per line of ``text``; None for a blank one

    def assemble(self, translations: List[Translation]) -> DocumentTranslation:
        """The document's text with each line made of its pieces' best translations."""
        if len(translations) != len(self.pieces):
            raise ValueError(f"{len(self.pieces)} pieces but {len(translations)} translations")
        out = []
        for raw, line in zip(self.text.split("\n"), self.lines):
            if line is None:
                out.append(raw)
            else:
                body = " ".join(t.text for t in translations[line.first: line.first + line.count])
                out.append(line.indent + body + line.ending)
        return DocumentTranslation(text="\n".join(out), sentences=list(translations))


def split_document(translator, text: str, language: Optional[str] = None,
                   max_sentence_tokens: Optional[int] = None, max_len_b: Optional[int] = None,
                   where: str = "the text") -> SplitDocument:
    """Lines, sentences, and pieces short enough for the model, each piece checked as the
    core checks a sentence (``checked_sentence``: ``TooLong`` for a single word longer than
    the model reads, named by ``where``).

    ``language``: the source language for sentence splitting (default: the task's source
    language). ``max_sentence_tokens``: longer sentences are split (default: the
    translator's ``sentence_cut``, as long as most training sentences; with ``max_len_b``
    given, at most ``max(16, max_len_b)``, so a piece's translation is never cut off)."""
    language = language or translator.languages[0]
    if max_sentence_tokens is None and max_len_b is not None:
        max_sentence_tokens = min(translator.sentence_cut, max(16, max_len_b))
    max_sentence_tokens = cut_length(max_sentence_tokens, translator.source_limit, translator.sentence_cut)
    encode = functools.lru_cache(maxsize=None)(translator.encode)  # each piece once: the cuts try many

    def fits(piece: str) -> bool:
        return translator.token_count(encode(piece)) <= max_sentence_tokens

    pieces: List[str] = []
    lines: List[Optional[_Line]] = []
    for raw in text.split("\n"):
        ending = "\r" if raw.endswith("\r") else ""
        line = raw[:-1] if ending else raw
        if not line.strip():
            lines.append(None)  # a blank line: a paragraph break, kept as it is
            continue
        indent = line[: len(line) - len(line.lstrip())]
        first = len(pieces)
        for sentence in split_sentences(line, language):
            pieces.extend(split_long_sentence(sentence, fits))
        lines.append(_Line(indent, first, len(pieces) - first, ending))
    checked = [checked_sentence(piece, encode, translator.source_limit, where, word=True) for piece in pieces]
    return SplitDocument(text, checked, lines)


def checked_document(translator, text: str, where: str = "the text", **split) -> SplitDocument:
    """``split_document`` (``split``: its options) for a text that must hold something to
    translate: a blank one is refused (``EmptySentence``), as an empty sentence is."""
    if not text.strip():
        raise EmptySentence(where)
    return split_document(translator, text, where=where, **split)


def translate_document(translator, text: str, language: Optional[str] = None,
                       max_sentence_tokens: Optional[int] = None,
                       on_split: Optional[Callable[[SplitDocument], None]] = None,
                       options: Optional[TranslationOptions] = None, **asked) -> DocumentTranslation:
    """Translate ``text``, keeping its paragraphs and line breaks; all its sentences in one
    call of ``translator.translate`` with ``options`` (a ``TranslationOptions`` built by the
    caller) or the options ``asked`` by name (beam, progress, ...), as that call takes them.
    A ``max_len_b`` asked for bounds the cut (``split_document``). ``on_split(document)`` is
    told the pieces before they are translated (a progress bar's total). A blank text is
    refused (``EmptySentence``: ``checked_document``)."""
    options = TranslationOptions.asked(translator.defaults, **asked) if options is None else options.with_(**asked)
    asked_bound = options.generation.max_len_b if options.generation.max_len_b != translator.defaults.max_len_b else None
    document = checked_document(translator, text, language=language, max_sentence_tokens=max_sentence_tokens,
                                max_len_b=asked.get("max_len_b", asked_bound))
    if on_split is not None:
        on_split(document)
    return document.assemble(translator.translate(document.pieces, options))
