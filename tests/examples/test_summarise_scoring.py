"""score.py's copy rate on hand-counted cases."""

from pathlib import Path

from .example_scripts import load

SCORE = Path(__file__).resolve().parents[2] / "examples" / "summarise_debian" / "score.py"


def _score_module():
    return load(SCORE)


def test_the_copy_rate_counts_rare_reference_words_the_description_has():
    score = _score_module()
    frequent = {"the", "a", "for", "tool"}
    references = ["GTK tool for PDF files", "Fast JSON parser", "the Zstd library"]
    descriptions = ["A GTK viewer for PDF and PS files.", "A parser of JSON, and fast.", "Compression."]
    hypotheses = ["viewer for pdf", "fast json parser library", "a library"]
    # by hand: pair 1 wants {gtk, pdf, files} (tool, for frequent), the hypothesis has pdf: 1 of 3;
    # pair 2 wants {fast, json, parser}, has all 3; pair 3 wants nothing (zstd, library not in the
    # description; the is frequent). 4 of 6.
    assert score.copy_rate(references, hypotheses, descriptions, frequent) == 100.0 * 4 / 6
    assert score.copy_rate(["x"], ["x"], ["y"], set()) == 0.0  # nothing wanted: 0, not a division by zero


def test_words_are_lower_case_letters_and_digits_as_rouge_sees_them():
    score = _score_module()
    assert score.words("Qt5-based GUI, v2.0!") == ["qt5", "based", "gui", "v2", "0"]
