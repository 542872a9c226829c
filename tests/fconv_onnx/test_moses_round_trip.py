"""Moses' round trip keeps programming names and quotation marks (fconv_onnx/moses_round_trip.py),
and is sacremoses itself everywhere else: checked against sacremoses on the quickstart's corpus."""

import lzma
from pathlib import Path

import pytest
from sacremoses import MosesDetokenizer, MosesTokenizer

from fconv_onnx import moses_round_trip

BIBLE = Path(__file__).resolve().parents[2] / "examples" / "bible_es_en" / "data"

# sentences users of a technical corpus write, in three languages
WRITTEN = [
    ("en", "Compile it with g++ or clang++ as C++17; the C# and F# bindings need .NET.", ["g++", "clang++", "C++17", "C#", "F#"]),
    ("en", "C++ is not C, and \"C++\" is a name.", ["C++"]),
    ("en", "The GTK+ toolkit and Notepad++ 8 run on it.", ["GTK+", "Notepad++"]),
    ("de", "Oberflächen mit GTK+ (Version 3) oder Qt.", ["GTK+"]),
    ("de", "Das Paket »pbuilder erstellen« baut C++-freie Pakete mit „sauberen“ Abhängigkeiten.", ["»", "«", "„", "“"]),
    ("de", "Er sagte: »Das ist ‚gut‘ so«, und nutzt C#.", ["C#", "‚", "‘"]),
    ("es", "El compilador «g++» traduce C++ y el de C# no.", ["g++", "C++", "C#", "«", "»"]),
    ("es", "«Hola», dijo; «adiós», respondió.", ["«", "»"]),
]


@pytest.mark.parametrize("lang,sentence,tokens", WRITTEN, ids=[f"{lang}-{i}" for i, (lang, _, _) in enumerate(WRITTEN)])
@pytest.mark.parametrize("escape", [True, False])
def test_what_was_written_comes_back_as_written(lang, sentence, tokens, escape):
    tokenized = moses_round_trip.tokenize(MosesTokenizer(lang), sentence, aggressive_dash_splits=True, escape=escape)
    words = tokenized.split()
    for token in tokens:
        assert token in words  # a single token, which BPE and the model see whole
    assert moses_round_trip.detokenize(MosesDetokenizer(lang), tokenized) == sentence


def test_sacremoses_alone_breaks_them():
    """The reference the fix is measured against: what fairseq 0.12's --tokenizer moses gives back."""
    for lang, sentence, _ in WRITTEN:
        tokenized = MosesTokenizer(lang).tokenize(sentence, aggressive_dash_splits=True, return_str=True, escape=True)
        assert MosesDetokenizer(lang).detokenize(tokenized.split()) != sentence


def test_quotes_pair_as_they_come():
    attach = moses_round_trip.attach_quotes
    assert attach("» a b « c".split()) == ["»a", "b«", "c"]
    assert attach("« a » b".split()) == ["«a»", "b"]
    assert attach("» „ x “ «".split()) == ["»„x“«"]
    assert attach("a « b".split()) == ["a", "«b"]  # an opening mark left open still opens
    assert attach("a b".split()) == ["a", "b"]


def test_names_that_only_look_alike_are_left_to_sacremoses():
    moses = MosesTokenizer("en")
    for text in ["5+5 and x++y", "a#b and #hashtag", "issue #12", "C+ grades", "++i"]:
        assert moses_round_trip.tokenize(moses, text, True, True) == moses.tokenize(
            text, aggressive_dash_splits=True, return_str=True, escape=True)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_quickstarts_corpus_tokenises_and_reads_back_as_sacremoses_does(lang):
    """Its verses have none of the names or quotation marks: the quickstart's text, and so its
    BLEU, is what it was (2,000 verses spread over the Bible)."""
    with lzma.open(BIBLE / f"bible.{lang}.xz", "rt", encoding="utf-8") as f:
        verses = f.read().splitlines()[::15][:2000]
    moses, detokenizer = MosesTokenizer(lang), MosesDetokenizer(lang)
    for verse in verses:
        plain = moses.tokenize(verse, aggressive_dash_splits=True, return_str=True, escape=True)
        assert moses_round_trip.tokenize(moses, verse, True, True) == plain
        assert moses_round_trip.detokenize(detokenizer, plain) == detokenizer.detokenize(plain.split())
