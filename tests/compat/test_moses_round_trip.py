"""fairseq's --tokenizer moses, with the plugin loaded, keeps C++, C# and quotation marks
(compat/moses_round_trip.py), as the inference core's codec does."""

import json
import subprocess
import sys

import pytest
from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig

from fconv_plugin.inference.text_codec import TextCodec, moses_decode, moses_encode
from tests.tasks import PLUGIN_DIR, run_tool

SENTENCES = [
    ("en", "Build it with g++ or clang++ (C++17), not C#."),
    ("de", "Er schrieb »pbuilder erstellen« und „fertig“ in C++."),
    ("es", "«Hola», dijo el compilador de C#."),
]

FAIRSEQS_TOKENIZER = """
import json, sys
from argparse import Namespace
import fconv_plugin.compat
from fairseq.data import encoders
fconv_plugin.compat.install()
out = []
for lang, sentence in json.loads(sys.argv[1]):
    moses = encoders.build_tokenizer(Namespace(tokenizer="moses", source_lang=lang, target_lang=lang,
                                               moses_no_dash_splits=False, moses_no_escape=False))
    tokens = moses.encode(sentence)
    out.append([tokens, moses.decode(tokens)])
print(json.dumps(out))
"""


def test_fairseqs_tokenizer_with_the_fixes_gives_back_what_was_written():
    result = subprocess.run([sys.executable, "-c", FAIRSEQS_TOKENIZER, json.dumps(SENTENCES)], capture_output=True,
                            text=True, check=True, timeout=120)
    for (lang, sentence), (tokens, back) in zip(SENTENCES, json.loads(result.stdout.splitlines()[-1])):
        assert back == sentence
        moses = MosesTokenizer(MosesTokenizerConfig(source_lang=lang, target_lang=lang))
        assert tokens == moses_encode(moses, sentence)  # the core's codec tokenises alike
        unfixed = moses.tok.tokenize(sentence, aggressive_dash_splits=True, return_str=True, escape=True)  # fairseq 0.12's call
        assert moses.detok.detokenize(unfixed.split()) != sentence


def test_the_cores_codec_encodes_and_decodes_through_the_round_trip():
    codec = TextCodec.__new__(TextCodec)
    codec.bpe = None
    for lang, sentence in SENTENCES:
        codec.tokenizer = MosesTokenizer(MosesTokenizerConfig(source_lang=lang, target_lang=lang))
        assert codec.encode(sentence) == moses_encode(codec.tokenizer, sentence)
        assert codec.decode(codec.encode(sentence)) == moses_decode(codec.tokenizer, codec.encode(sentence)) == sentence


@pytest.mark.slow
def test_fairseq_interactive_reads_cpp_as_one_word(trained_model):
    data_bin, save_dir, _ = trained_model
    result = run_tool("fairseq-interactive", data_bin, "--user-dir", PLUGIN_DIR, "--path", save_dir / "checkpoint_best.pt",
                      "--source-lang", "src", "--target-lang", "tgt", "--tokenizer", "moses", "--beam", "2",
                      input="s1 C++ s2 C# s3\n")
    source = next(line for line in result.stdout.splitlines() if line.startswith("S-0"))
    assert source.split("\t")[1] == "s1 <unk> s2 <unk> s3"  # two words unknown to the tiny task, not six
