"""A sentence is checked once, by the core (``checked_sentence``), which raises typed errors; each
edge words them its own way: the Python API the errors themselves, the server an HTTP status
and message (native and LibreTranslate's), fairseq-interactive a note or a one-line error.
An empty text is refused on every face (the faces' own tests: tests/serve, tests/compat,
tests/cli, tests/inference/test_translator.py)."""

import pytest

from fconv_plugin.compat.interactive_input import _problem
from fconv_plugin.errors import EmptySentence, FConvError, TooLong
from fconv_plugin.inference.documents import checked_document
from fconv_plugin.inference.text_codec import CheckedSentence, check_sentence, checked_sentence
from fconv_plugin.serve.requests import BadRequest, request_text


class WordTranslator:
    """What the checks read of a translator: tokens are words (</s> counted), 6 of them at most."""

    source_limit = 6
    sentence_cut = 6
    languages = ("en", "en")

    def encode(self, line):
        return line

    def token_count(self, encoded):
        return len(encoded.split()) + 1

    def checked_sentence(self, sentence, where="the sentence"):
        return checked_sentence(sentence, self.encode, self.source_limit, where)


def test_the_core_checks_once_and_raises_typed_errors():
    assert check_sentence("a b c", 6) == 4
    with pytest.raises(EmptySentence) as empty:
        check_sentence("  ", 6, "sentence 2")
    assert str(empty.value) == "sentence 2 is empty" and isinstance(empty.value, FConvError)
    with pytest.raises(TooLong) as long:
        check_sentence("a b c d e f", 6)
    assert (long.value.where, long.value.count, long.value.limit, long.value.word) == ("the sentence", 7, 6, False)
    assert str(long.value) == ("the sentence has 7 tokens; the model reads at most 6; split it "
                               "(translate_document splits long sentences itself)")


def test_a_checked_sentence_holds_what_the_model_reads_and_an_empty_text_is_never_encoded():
    encoded_texts = []

    def encode(text):
        encoded_texts.append(text)
        return text.lower()

    assert checked_sentence("A B", encode, 6, "sentence 1") == CheckedSentence("A B", "a b", 3)
    with pytest.raises(EmptySentence, match="^sentence 2 is empty$"):
        checked_sentence(" \t", encode, 6, "sentence 2")
    assert encoded_texts == ["A B"]
    # a line without a word is passed through, never decoded: it is held to no length
    assert checked_sentence("1 2 3 4 5 6 7 :)", encode, 6) == CheckedSentence("1 2 3 4 5 6 7 :)", "1 2 3 4 5 6 7 :)", 9)
    with pytest.raises(TooLong):
        checked_sentence("1 2 3 4 5 6 a", encode, 6)


def test_a_document_is_checked_piece_by_piece():
    with pytest.raises(EmptySentence, match="^text 1 is empty$"):
        checked_document(WordTranslator(), " \n ", "text 1")
    long_sentence = " ".join(["w"] * 12) + "."  # cut into pieces the model reads: no error
    pieces = checked_document(WordTranslator(), long_sentence, "text 1").pieces
    assert len(pieces) > 1 and all(isinstance(piece, CheckedSentence) and piece.tokens <= 6 for piece in pieces)
    with pytest.raises(TooLong) as long:
        checked_document(_Unsplittable(), "one", "text 1")  # a single word over the limit
    assert long.value.word and (long.value.count, long.value.limit) == (10, 6)


class _Unsplittable(WordTranslator):
    """A translator whose every word is 9 tokens: one word over the model's 6."""

    def encode(self, line):
        return " ".join(["t"] * 9 * len(line.split()))


@pytest.mark.parametrize("text,as_document,status,message", [
    ("", False, 422, "sentence 3 is empty"),
    ("a b c d e f g", False, 413, 'sentence 3 has 8 tokens; the model reads at most 6; split it, or send "document": true '
                                  "to have it split into sentences"),
])
def test_the_native_api_answers_the_cores_errors(text, as_document, status, message):
    with pytest.raises(BadRequest) as refused:
        request_text(WordTranslator(), text, "sentence 3", as_document)
    assert (refused.value.status, str(refused.value)) == (status, message)


def test_the_native_api_answers_a_word_too_long_for_the_model():
    with pytest.raises(BadRequest) as refused:
        request_text(_Unsplittable(), "one", "the sentence", True)
    assert (refused.value.status, str(refused.value)) == (413, "the sentence has a word of 10 tokens; the model reads at most 6")


def test_libretranslate_words_an_empty_text_its_own_way():
    with pytest.raises(BadRequest) as refused:
        request_text(WordTranslator(), "", "the text", True, empty="Invalid request: q holds an empty text")
    assert (refused.value.status, str(refused.value)) == (400, "Invalid request: q holds an empty text")


def test_fairseq_interactive_notes_or_stops_in_one_line():
    encode = WordTranslator().encode
    assert _problem("", encode, 6, False, 4) == "is empty"
    assert _problem("a b", encode, 6, False, 4) is None
    assert _problem("a b c d e f g", encode, 6, True, 4) == "has 8 tokens, more than the model reads (6, --max-source-positions)"
    with pytest.raises(FConvError, match=r"^input line 4 has 8 tokens but the model reads at most 6 \(--max-source-positions\)"):
        _problem("a b c d e f g", encode, 6, False, 4)
    # fairseq's generator decodes a line without a word too: it is held to the model's length
    assert _problem("1 2 3 4 5 6 7", encode, 6, True, 4) == "has 8 tokens, more than the model reads (6, --max-source-positions)"
