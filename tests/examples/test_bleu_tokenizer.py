"""examples/lib/bleu_tokenizer.py: BLEU tokenised as the field reports each target language."""

import subprocess
import sys
from pathlib import Path

import sacrebleu

LIB = Path(__file__).resolve().parents[2] / "examples" / "lib"
sys.path.insert(0, str(LIB))
from bleu_tokenizer import bleu_tokenizer  # noqa: E402


def test_spaced_languages_get_13a_and_chinese_japanese_korean_their_own():
    assert [bleu_tokenizer(lang)[0] for lang in ("en", "de", "es", "fr")] == ["13a"] * 4
    assert bleu_tokenizer("zh")[0] == "zh"
    assert bleu_tokenizer("ja")[0] == "ja-mecab"  # its packages come with the project's setup
    assert bleu_tokenizer("ko")[0] == "ko-mecab"
    assert [bleu_tokenizer(lang)[0] for lang in ("zh-CN", "ja_JP", "jpn", "KO")] == ["zh", "ja-mecab", "ja-mecab", "ko-mecab"]
    assert bleu_tokenizer("th") == ("char", "character-level: 'th' is written without spaces between words")


def test_japanese_scored_by_words_not_by_whole_sentences():
    """13a leaves an unspaced sentence one token: one word wrong is BLEU 0; MeCab's words see the rest."""
    reference, hypothesis = ["私は昨日東京で新しい本を買いました。"], ["私は昨日大阪で新しい本を買いました。"]
    assert sacrebleu.corpus_bleu(hypothesis, [reference], tokenize="13a").score == 0.0
    assert sacrebleu.corpus_bleu(hypothesis, [reference], tokenize=bleu_tokenizer("ja")[0]).score > 40


def test_a_missing_package_falls_back_to_characters_and_says_so():
    hidden = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['MeCab'] = None; sys.path.insert(0, sys.argv[1]); "
                               "import bleu_tokenizer; print(*bleu_tokenizer.bleu_tokenizer('ja'), sep='|')", str(LIB)],
        capture_output=True, text=True, check=True)
    tokenizer, why = hidden.stdout.strip().split("|")
    assert tokenizer == "char"
    assert why.startswith("character-level: sacreBLEU's ja-mecab for 'ja' needs mecab-python3 and ipadic, not installed here")
