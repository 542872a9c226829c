"""Which languages a translator reads and writes when none are given: hand-made data-bins."""

import pytest

from fconv_plugin.errors import FConvError
from fconv_plugin.inference.loading import language_pair


def test_given_languages_are_kept(tmp_path):
    assert language_pair(str(tmp_path), "de", "en") == {"source_lang": "de", "target_lang": "en"}


def test_a_binarised_split_names_the_pair(tmp_path):
    for name in ("dict.es.txt", "dict.en.txt", "train.es-en.es.bin", "train.es-en.es.idx"):
        (tmp_path / name).write_text("")
    assert language_pair(str(tmp_path), None, None) == {"source_lang": "es", "target_lang": "en"}
    assert language_pair(str(tmp_path), None, "fr") == {"source_lang": "es", "target_lang": "fr"}


def test_dictionaries_alone_get_one_line_naming_them(tmp_path):
    for name in ("dict.es.txt", "dict.en.txt"):
        (tmp_path / name).write_text("")
    with pytest.raises(FConvError) as error:
        language_pair(str(tmp_path), None, None)
    assert str(error.value) == (f"which languages? {tmp_path} has the dictionaries of en, es and no binarised split "
                                "naming the pair; give --source-lang and --target-lang (-s and -t)")
