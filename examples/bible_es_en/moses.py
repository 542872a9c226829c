"""Tokenise or detokenise stdin with fairseq's own ``--tokenizer moses``.

    python moses.py tokenize es < raw.es > tok.es
    python moses.py detokenize en < tok.en > detok.en

Using fairseq's MosesTokenizer with its default options (dash splits and escaping
on), and the plugin's fix of it (C++, C# and quotation marks come back as written:
``fconv_plugin/compat/moses_round_trip.py``), makes the training text exactly what
``fairseq-interactive --tokenizer moses --user-dir fconv_plugin`` produces at translation
time; the sacremoses command line's ``-x`` flag has meant escaping on or off depending on
the click version installed.
"""

import logging
import sys

for name in ("fairseq", "fconv_plugin"):  # importing them logs INFO lines a tokenizer has no use for
    logging.getLogger(name).setLevel(logging.WARNING)
from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig  # noqa: E402

from fconv_plugin.compat import moses_round_trip  # noqa: E402


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("tokenize", "detokenize"):
        sys.exit("usage: python moses.py tokenize|detokenize LANG < input > output")
    direction, lang = sys.argv[1:]
    moses_round_trip.install()
    moses = MosesTokenizer(MosesTokenizerConfig(source_lang=lang, target_lang=lang))
    convert = moses.encode if direction == "tokenize" else moses.decode
    for line in sys.stdin:
        sys.stdout.write(convert(line.strip()) + "\n")


if __name__ == "__main__":
    main()
