"""Tokenise or detokenise stdin with fairseq's own ``--tokenizer moses``.

    python moses.py tokenize es < raw.es > tok.es
    python moses.py detokenize en < tok.en > detok.en

Using fairseq's MosesTokenizer with its default options (dash splits and escaping
on) makes the training text exactly what ``fairseq-interactive --tokenizer moses``
produces at translation time; the sacremoses command line's ``-x`` flag has meant
escaping on or off depending on the click version installed.
"""

import logging
import sys

logging.getLogger("fairseq").setLevel(logging.WARNING)  # importing fairseq logs INFO lines a tokenizer has no use for
from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig  # noqa: E402


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("tokenize", "detokenize"):
        sys.exit("usage: python moses.py tokenize|detokenize LANG < input > output")
    direction, lang = sys.argv[1:]
    moses = MosesTokenizer(MosesTokenizerConfig(source_lang=lang, target_lang=lang))
    convert = moses.encode if direction == "tokenize" else moses.decode
    for line in sys.stdin:
        sys.stdout.write(convert(line.strip()) + "\n")


if __name__ == "__main__":
    main()
