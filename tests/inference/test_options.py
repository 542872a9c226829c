"""inference/options.TranslationOptions: what one translation asks, built from keywords."""

import pytest

from fconv_plugin.errors import FConvError
from fconv_plugin.inference.options import GENERATION, GenerationOptions, TranslationOptions

DEFAULTS = GenerationOptions(beam=4, lenpen=0.8, max_len_b=50)  # a translator's own, not the class defaults


def test_an_unknown_option_is_refused_in_one_line_naming_it_and_the_known_ones():
    with pytest.raises(FConvError) as refused:
        TranslationOptions.asked(DEFAULTS, beam=2, bean=3)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("unknown translation option 'bean'; the options are ")
    named = message.split("the options are ")[1].split(", ")
    assert "beam" in named and "alignment" in named and "generation" not in named
    assert set(GENERATION) <= set(named)


def test_keywords_override_the_translators_defaults_and_leave_the_rest():
    options = TranslationOptions.asked(DEFAULTS, beam=2, alignment=True, max_tokens=900)
    assert options.generation == GenerationOptions(beam=2, lenpen=0.8, max_len_b=50)
    assert options.alignment is True and options.max_tokens == 900
    assert options.attention is False and options.decode is True  # not asked: the class's own
    assert TranslationOptions.asked(DEFAULTS).generation == DEFAULTS


def test_a_search_that_cannot_be_run_is_refused():
    with pytest.raises(FConvError, match=r"^beam 2 and nbest 3: give beam >= 1 and 1 <= nbest <= beam$"):
        TranslationOptions.asked(DEFAULTS, beam=2, nbest=3)
    with pytest.raises(FConvError, match=r"^beam 0 and nbest 1"):
        TranslationOptions.asked(DEFAULTS, beam=0)


def test_with_changes_fields_and_generation_settings_by_name():
    options = TranslationOptions.asked(DEFAULTS, beam=2)
    changed = options.with_(beam=3, decode=False)
    assert changed.generation == GenerationOptions(beam=3, lenpen=0.8, max_len_b=50) and changed.decode is False
    assert options.generation.beam == 2 and options.decode is True  # the value itself is unchanged (frozen)
