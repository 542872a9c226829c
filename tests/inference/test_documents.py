"""Documents into sentences and back: hand-checked cases (the model's part is in test_translator.py)."""

from fconv_plugin.inference import Hypothesis, Translation, split_long_sentence, split_sentences
from fconv_plugin.inference.documents import split_document


def test_sentences_follow_the_languages_rules():
    assert split_sentences("Y dijo Dios: Sea la luz. Y fué la luz. El Sr. García vino.", "es") == [
        "Y dijo Dios: Sea la luz.", "Y fué la luz.", "El Sr. García vino."]
    assert split_sentences("Mr. Smith arrived at 3 p.m. on Monday. Then he left!", "en") == [
        "Mr. Smith arrived at 3 p.m. on Monday.", "Then he left!"]
    assert split_sentences("   ", "en") == []


def _fits_in(words: int):
    return lambda piece: len(piece.split()) <= words


def test_a_long_sentence_is_cut_after_a_clause_then_a_phrase_then_between_words():
    sentence = "one two three; four five, six seven eight nine ten"
    assert split_long_sentence(sentence, _fits_in(20)) == [sentence]
    assert split_long_sentence(sentence, _fits_in(5)) == ["one two three;", "four five,", "six seven eight nine ten"]
    assert split_long_sentence(sentence, _fits_in(2)) == ["one two", "three;", "four five,", "six seven", "eight nine", "ten"]
    # no punctuation: as many words as fit
    assert split_long_sentence("a b c d e f g", _fits_in(3)) == ["a b c", "d e f", "g"]
    # a word that fits nowhere stays whole (the model then names it)
    assert split_long_sentence("x" * 50, _fits_in(0)) == ["x" * 50]


def test_every_piece_fits_and_nothing_is_lost():
    words = [f"w{i}" + ("," if i % 7 == 3 else "") + (";" if i % 23 == 5 else "") for i in range(500)]
    pieces = split_long_sentence(" ".join(words), _fits_in(40))
    assert all(len(piece.split()) <= 40 for piece in pieces)
    assert " ".join(pieces).split() == words


class WordCountingTranslator:
    """The translator interface documents use, with a hand-checkable 'translation': each
    word upper-cased. Its tokens are whitespace words."""

    source_limit = 12
    sentence_cut = 12  # what Translator.sentence_cut would be with training sentences this long
    languages = ("es", "en")

    class defaults:
        max_len_b = 200

    def encode(self, line):
        return line

    def token_count(self, encoded):
        return len(encoded.split()) + 1

    def translate(self, sentences, options=None, **asked):
        return [Translation(s.text, [Hypothesis(s.text.upper(), [], 0.0, [])]) for s in sentences]


def test_paragraphs_lines_and_indentation_come_back_in_place():
    long_sentence = "Siete ocho nueve diez once doce trece catorce quince dieciséis diecisiete, dieciocho."
    text = f"Uno dos. Tres cuatro.\n  Cinco seis.\r\n\n\n{long_sentence}\n"
    translator = WordCountingTranslator()
    document = split_document(translator, text, "es")
    # 12 words + </s> is over the 12 tokens the model reads: cut after the comma
    assert [piece.text for piece in document.pieces] == ["Uno dos.", "Tres cuatro.", "Cinco seis.",
                               "Siete ocho nueve diez once doce trece catorce quince dieciséis diecisiete,", "dieciocho."]
    translated = document.assemble(translator.translate(document.pieces))
    assert translated.text == ("UNO DOS. TRES CUATRO.\n  CINCO SEIS.\r\n\n\n"
                               "SIETE OCHO NUEVE DIEZ ONCE DOCE TRECE CATORCE QUINCE DIECISÉIS DIECISIETE, DIECIOCHO.\n")
    assert [t.source for t in translated.sentences] == [piece.text for piece in document.pieces]
