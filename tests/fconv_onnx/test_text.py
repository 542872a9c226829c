"""fconv_onnx's text pipeline against fairseq's own --tokenizer moses, --bpe subword_nmt and Dictionary."""

import subprocess
import sys

from fairseq.data import Dictionary
from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig
from fairseq.data.encoders.subword_nmt_bpe import SubwordNMTBPE, SubwordNMTBPEConfig

from fconv_onnx.manifest import BPEOptions, MosesOptions
from fconv_onnx.text import TextPipeline, Vocabulary
from fconv_plugin.inference.text_codec import moses_decode, moses_encode  # fairseq's, as the plugin's commands run it

TRAIN = [
    "Y dijo Dios: Sea la luz; y fué la luz.",
    "El Señor es mi pastor, nada me faltará — dice el salmo.",
    "«¿Quién subirá al monte de Jehová?» preguntó el rey-sacerdote & su pueblo.",
    "Porque de tal manera amó Dios al mundo, que ha dado á su Hijo unigénito.",
] * 3
SENTENCES = TRAIN[:4] + ["Los 12 discípulos (y otros) llegaron a las 3:30 p.m.", "  espacios   de   más  ", "unknownword xyzzy",
                         "Escrito en C++17 y C#, compilado con g++."]
TARGETS = ["And God said , Let there be light : and there was light .", "&quot; Who &apos;s there ? &quot; he said",
           "the e@@ ar@@ th was with@@ out form", "it costs $ 5 , or 1 @-@ 2 days", "« Hello » , said the C++ compiler"]


def _codes(tmp_path):
    text = tmp_path / "train.tok"
    moses = MosesTokenizer(MosesTokenizerConfig(source_lang="es", target_lang="en"))
    text.write_text("\n".join(moses.encode(line) for line in TRAIN) + "\n", encoding="utf-8")
    codes = tmp_path / "codes"
    subprocess.run([sys.executable, "-m", "subword_nmt.learn_bpe", "-s", "60", "-i", str(text), "-o", str(codes)], check=True)
    return codes


def test_encoding_and_decoding_equal_the_plugins_codec_on_fairseqs_tokenizer_and_bpe(tmp_path):
    """The same round-trip functions (fconv_onnx/moses_round_trip.py) on both sides: this checks that
    the ONNX pipeline applies them around sacremoses and subword-nmt as the plugin's codec does around
    fairseq's --tokenizer moses and --bpe subword_nmt; on text with no name or quotation mark for them
    to keep, the pipeline is fairseq's own encoder, compared directly."""
    codes = _codes(tmp_path)
    (tmp_path / "bpe.codes").write_bytes(codes.read_bytes())
    for dash_splits, escape in [(True, True), (False, False)]:
        pipeline = TextPipeline(MosesOptions(source_lang="es", target_lang="en", aggressive_dash_splits=dash_splits,
                                             escape=escape), BPEOptions(separator="@@"), str(tmp_path))
        moses = MosesTokenizer(MosesTokenizerConfig(source_lang="es", target_lang="en",
                                                    moses_no_dash_splits=not dash_splits, moses_no_escape=not escape))
        bpe = SubwordNMTBPE(SubwordNMTBPEConfig(bpe_codes=str(codes)))
        for sentence in SENTENCES:
            assert pipeline.encode(sentence) == bpe.encode(moses_encode(moses, sentence))
        for sentence in SENTENCES[:2]:  # nothing for the round trip to keep: fairseq's encoder itself
            assert pipeline.encode(sentence) == bpe.encode(moses.tok.tokenize(
                sentence, aggressive_dash_splits=dash_splits, return_str=True, escape=escape))
        for target in TARGETS:
            assert pipeline.decode(target) == moses_decode(moses, bpe.decode(target))
    assert any("@@" in TextPipeline(None, BPEOptions(separator="@@"), str(tmp_path)).encode(s)
               for s in SENTENCES)  # the codes really split words


def test_vocabulary_encodes_and_prints_as_fairseqs_dictionary(tmp_path):
    dictionary = Dictionary()
    for word in "la luz y Dios dijo fué".split():
        dictionary.add_symbol(word)
    path = tmp_path / "vocab"
    path.write_text("".join(symbol + "\n" for symbol in dictionary.symbols), encoding="utf-8")
    vocabulary = Vocabulary(str(path), dictionary.unk(), dictionary.eos(), dictionary.pad(), dictionary.bos())
    for line in ["Y dijo Dios la luz", "  la\tluz  ", "fué"]:
        assert vocabulary.encode(line) == dictionary.encode_line(line, add_if_not_exist=False).tolist()
    ids = [dictionary.bos(), dictionary.index("la"), dictionary.unk(), dictionary.index("luz"), dictionary.eos()]
    assert vocabulary.string(ids) == dictionary.string(ids) == "la <unk> luz"
