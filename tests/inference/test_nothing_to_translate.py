"""Which lines hold nothing to translate (they pass through unchanged): hand-checked cases."""

import pytest

from fconv_plugin.inference.text_codec import nothing_to_translate


@pytest.mark.parametrize("line", ["🙏", "¡¡¡ ... !!!", "3:16", "12,5 %", "", "  ", "https://example.org/a?b=1",
                                  "www.example.org", "me@example.org", "(1) – [2]", "😀👍🏽"])
def test_no_word(line):
    assert nothing_to_translate(line)


@pytest.mark.parametrize("line", ["Hola", "Sea la luz 🙏", "Juan 3:16", "véase https://example.org", "à", "日本",
                                  "Ω", "s1 s2"])
def test_words(line):
    assert not nothing_to_translate(line)
