"""The inference core against fairseq-interactive: the same texts and scores, options on the
call, documents, --replace-unk, int8 and copying models."""

import logging
import random
from types import SimpleNamespace

import pytest
import torch
from fairseq.tasks import FairseqTask

from fconv_plugin import precision
from fconv_plugin.errors import EmptySentence, FConvError
from fconv_plugin.inference import Translator
from fconv_plugin.inference.loading import place_model
from fconv_plugin.inference.text_codec import source_tokens
from tests.support import DictionaryTask, build_plugin_model, make_dictionary
from tests.tasks import interactive_answers

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def _sentences(count, seed):
    rng = random.Random(seed)
    return [" ".join(f"s{rng.randrange(30)}" for _ in range(rng.randint(3, 9))) for _ in range(count)]


@pytest.fixture(scope="module")
def translator(trained_model):
    data_bin, save_dir, _ = trained_model
    return Translator.from_pretrained(save_dir / "checkpoint_best.pt", data_bin, beam=5)


def _same(hypothesis, answer):
    return hypothesis.text == answer["text"] and abs(hypothesis.score - answer["score"]) < 1e-4


@pytest.mark.parametrize("beam", [1, 5])
def test_single_sentences_are_fairseq_interactives_d_lines(translator, trained_model, beam):
    data_bin, save_dir, _ = trained_model
    lines = _sentences(16, seed=beam)
    expected = interactive_answers(data_bin, save_dir / "checkpoint_best.pt", lines, beam=beam)
    results = translator.translate(lines, beam=beam)
    assert [r.source for r in results] == lines
    assert all(_same(r.best, e) for r, e in zip(results, expected)), [(r.best.text, e) for r, e in zip(results, expected)]
    for result in results:  # positional scores: log2 per token, </s> last; their mean is the score (lenpen 1)
        best = result.best
        assert len(best.positional_scores) == len(best.tokens)
        assert abs(sum(best.positional_scores) / len(best.tokens) - best.score) < 1e-4


def test_undecoded_texts_are_fairseq_interactives_h_lines(trained_model):
    """decode=False: each text as the model's tokens give it (the H line), which ``decode``
    (Moses here) turns into the default text."""
    data_bin, save_dir, _ = trained_model
    translator = Translator.from_pretrained(save_dir / "checkpoint_best.pt", data_bin, beam=5, tokenizer="moses",
                                            source_lang="src", target_lang="tgt")
    lines = _sentences(8, seed=11)
    expected = interactive_answers(data_bin, save_dir / "checkpoint_best.pt", lines, "--tokenizer", "moses",
                                   "--source-lang", "src", "--target-lang", "tgt")
    undecoded = translator.translate(lines, decode=False)
    assert [r.best.text for r in undecoded] == [e["encoded"] for e in expected]
    assert [translator.decode(r.best.text) for r in undecoded] == [e["text"] for e in expected]
    assert [r.best.text for r in translator.translate(lines)] == [e["text"] for e in expected]


def test_options_live_on_the_call_and_the_model_stays_as_built(translator, trained_model):
    data_bin, save_dir, _ = trained_model
    decoder = translator.models[0].decoder
    built = (decoder.need_attn, decoder.share_attention_across_beam)
    lines = _sentences(5, seed=7)
    expected = interactive_answers(data_bin, save_dir / "checkpoint_best.pt", lines, "--print-alignment")
    with_attention = translator.translate(lines, alignment=True, attention=True)
    assert [r.best.alignment for r in with_attention] == [[tuple(p) for p in e["alignment"]] for e in expected]
    best = with_attention[0].best
    assert len(best.attention.layers) == 2 and best.attention.source[-1] == "</s>"
    assert all(abs(sum(row) - 1) < 1e-4 for layer in best.attention.layers for row in layer)
    assert best.p_gen is None  # no copying
    without = translator.translate(lines)
    assert all(r.best.alignment is None and r.best.attention is None for r in without)
    assert [r.best.text for r in without] == [r.best.text for r in with_attention]
    assert (decoder.need_attn, decoder.share_attention_across_beam) == built
    nbest = translator.translate(lines[:2], beam=4, nbest=3)
    assert [len(r.hypotheses) for r in nbest] == [3, 3]
    assert all(r.hypotheses[0].score >= r.hypotheses[1].score >= r.hypotheses[2].score for r in nbest)


def test_a_document_keeps_its_paragraphs_and_every_sentence_has_a_translation(translator):
    paragraphs = [". ".join(_sentences(4, seed=10 + p)) + "." for p in range(3)]
    text = "\n\n".join(paragraphs[:2]) + "\n\n\n" + paragraphs[2] + "\n"
    document = translator.translate_document(text)
    sources = [t.source for t in document.sentences]
    assert len(sources) == 12 and all(t.text for t in document.sentences)
    assert " ".join(sources).replace(".", "").split() == text.replace(".", "").split()
    assert len([block for block in document.text.split("\n\n") if block.strip()]) == len(paragraphs)
    assert document.text.count("\n") == text.count("\n")
    # each line is its sentences' translations, as the sentences are translated on their own
    alone = translator.translate(sources)
    assert document.text.split("\n")[0] == " ".join(t.text for t in alone[:4])


def test_a_1500_token_paragraph_and_an_unbroken_1500_token_sentence_are_translated(translator):
    rng = random.Random(3)
    words = [f"s{rng.randrange(30)}" for _ in range(1500)]
    paragraph = " ".join(" ".join(words[i:i + 10]) + "." for i in range(0, 1500, 10))
    unbroken = " ".join(words)
    assert translator.token_count(translator.encode(unbroken)) > translator.source_limit
    for text in (paragraph, unbroken):
        document = translator.translate_document(text, max_tokens=3000)
        assert document.text.count("\n") == 0 and len(document.text.split()) > 1000
        assert all(translator.token_count(translator.encode(t.source)) <= 200 for t in document.sentences)


def test_replace_unk_gives_fairseq_interactives_text(unk_model):
    root, data_bin, checkpoint = unk_model
    lines = [line.strip() for line in open(root / "test.src")][:30]
    expected = interactive_answers(data_bin, checkpoint, lines, "--replace-unk")
    translator = Translator.from_pretrained(checkpoint, data_bin)
    results = translator.translate(lines, replace_unk=True)
    assert [r.best.text for r in results] == [e["text"] for e in expected]
    assert any("N" in r.best.text or "r" in r.best.text for r in results)  # rare words were copied
    plain = translator.translate(lines)
    assert any("<unk>" in r.best.text for r in plain)


def test_an_int8_checkpoint_translates_and_is_batch_invariant(trained_model, int8_checkpoint):
    data_bin, _, _ = trained_model
    translator = Translator.from_pretrained(int8_checkpoint, data_bin)
    assert translator.int8
    lines = _sentences(12, seed=11)
    batched = translator.translate(lines)
    alone = [translator.translate([line])[0] for line in lines]
    assert [(b.best.text, b.best.score) for b in batched] == [(a.best.text, a.best.score) for a in alone]


def test_the_cores_search_and_fairseqs_generator_give_the_same_translations(translator, trained_model):
    """``Translator(search="fairseq")`` runs fairseq's SequenceGenerator: the reference the
    vectorised search (``decoding/search.py``) must equal, texts, scores and alignments."""
    data_bin, save_dir, _ = trained_model
    reference = Translator.from_pretrained(save_dir / "checkpoint_best.pt", data_bin, beam=5, search="fairseq")
    lines = _sentences(24, seed=21)
    assert translator.session.generator(translator.defaults, False)[2] is not None  # the vectorised search runs
    assert reference.session.generator(reference.defaults, False)[2] is None
    for options in ({}, {"beam": 4, "nbest": 3, "lenpen": 0.7, "alignment": True}, {"beam": 1, "replace_unk": True}):
        ours, theirs = translator.translate(lines, **options), reference.translate(lines, **options)
        assert [r.hypotheses for r in ours] == [r.hypotheses for r in theirs], options
    with pytest.raises(Exception, match="search 'greedy': give one of vectorised, fairseq"):
        Translator.from_pretrained(save_dir / "checkpoint_best.pt", data_bin, search="greedy")


def test_the_model_runs_where_and_in_the_precision_fairseq_interactive_would(trained_model, int8_checkpoint):
    """``--cpu`` keeps it on the CPU; ``--fp16`` needs a GPU, ``--bf16`` a GPU or a CPU with
    bfloat16 units, and int8 the CPU, each refused in one line where it cannot run (on a
    machine without a GPU, as here)."""
    data_bin, save_dir, _ = trained_model
    checkpoint = save_dir / "checkpoint_best.pt"
    translator = Translator.from_pretrained(checkpoint, data_bin, cpu=True)
    assert translator.device.type == "cpu"
    assert {p.dtype for p in translator.models[0].parameters()} == {torch.float32}
    if torch.cuda.is_available():  # the GPU path is run by benchmarks/gpu.py on a GPU machine
        return
    with pytest.raises(FConvError, match="^--fp16 needs a GPU and none is in use; drop --fp16"):
        Translator.from_pretrained(checkpoint, data_bin, fp16=True)
    if precision.bf16_units() is None:
        with pytest.raises(FConvError, match=r"^--bf16 on the CPU needs bfloat16 units \(AMX-BF16 or AVX-512 BF16\)"):
            Translator.from_pretrained(checkpoint, data_bin, bf16=True)
    else:  # training's option: translating runs in float32
        bf16 = Translator.from_pretrained(checkpoint, data_bin, bf16=True)
        assert {p.dtype for p in bf16.models[0].parameters()} == {torch.float32}
    with pytest.raises(FConvError, match=r"^an int8 model \(fconv-quantize\) computes in int8 and float32; drop --fp16$"):
        Translator.from_pretrained(int8_checkpoint, data_bin, fp16=True)


@pytest.mark.parametrize("units", ["AVX-512 BF16", "AMX-BF16", None])
def test_bf16_on_the_cpu_translates_in_float32_with_a_note_or_is_refused_without_units(units, caplog):
    """The CPU's decision with its bfloat16 units passed in: with them a note points to int8
    and the float32 model runs; without them one line says to drop --bf16."""
    dictionary = make_dictionary(12)
    model = build_plugin_model("fconv", DictionaryTask(dictionary, dictionary), encoder_layers="[(16, 3)]",
                               decoder_layers="[(16, 3)]", encoder_embed_dim=8, decoder_embed_dim=8,
                               decoder_out_embed_dim=8)
    options = SimpleNamespace(common=SimpleNamespace(fp16=False, bf16=True))
    if units is None:
        with pytest.raises(FConvError, match="^--bf16 on the CPU needs bfloat16 units .*; drop --bf16 to run in float32$"):
            place_model(model, options, torch.device("cpu"), cpu_bf16_units=lambda: units)
        return
    with caplog.at_level(logging.INFO, logger="fconv_plugin.inference.loading"):
        place_model(model, options, torch.device("cpu"), cpu_bf16_units=lambda: units)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert [r.getMessage() for r in caplog.records] == [
        f"fconv_plugin: --bf16 on the CPU ({units}) is for training; translating runs in float32 "
        "(for a faster CPU translator, int8 weights: fconv-quantize)"]


class _Task(FairseqTask):
    """fairseq's own task methods over a source dictionary."""

    def __init__(self, dictionary):
        self.dictionary = dictionary

    @property
    def source_dictionary(self):
        return self.dictionary


class _OwnLookupTask(_Task):
    def get_interactive_tokens_and_lengths(self, lines, encode_fn):
        tokens = [torch.tensor([len(line)]) for line in lines]
        return tokens, [1] * len(lines)


def test_source_tokens_are_the_tasks_own():
    """One list per line where task and dictionary are fairseq's: encode_line's ids, as int64;
    a task with its own lookup keeps it."""
    dictionary = make_dictionary(20, "s")
    lines = ["s1 s2 s3", "  s4\ts5   unknown s19 ", "s0", "s7 s7 s7 \u00e9t\u00e9 s12\n"]
    tokens, lengths = source_tokens(_Task(dictionary), lines)
    expected, expected_lengths = FairseqTask.get_interactive_tokens_and_lengths(_Task(dictionary), lines, lambda x: x)
    assert lengths == expected_lengths == [4, 5, 2, 6]
    assert all(t.dtype == e.dtype == torch.long and torch.equal(t, e) for t, e in zip(tokens, expected))
    assert tokens[1][2] == dictionary.unk() and tokens[3][3] == dictionary.unk() and tokens[0][-1] == dictionary.eos()
    own, own_lengths = source_tokens(_OwnLookupTask(dictionary), lines)
    assert [int(t) for t in own] == [len(line) for line in lines] and own_lengths == [1] * 4


def test_lines_with_nothing_to_translate_pass_through_in_calls_and_documents(translator):
    lines = ["s1 s2 s3", "🙏", "¡¡¡ ... !!!", "3:16", "https://example.org/s1?q=2", "s4 s5"]
    results = translator.translate(lines, alignment=True)
    for index, line in ((0, "s1 s2 s3"), (5, "s4 s5")):  # the lines with words, as translated on their own
        alone = translator.translate([line], alignment=True)[0].best
        assert (results[index].text, results[index].best.alignment) == (alone.text, alone.alignment)
        assert abs(results[index].best.score - alone.score) < 1e-4
    assert [r.text for r in results[1:5]] == lines[1:5]
    assert all(r.best.score == 0.0 and r.best.alignment == [] for r in results[1:5])
    assert translator.translate(["🙏", "!!"])[1].text == "!!"  # no word anywhere: no generation at all
    numbers = " ".join(str(n) for n in range(translator.source_limit + 5))  # longer than the model reads: not read
    assert translator.translate(["s1", numbers])[1].text == numbers
    document = translator.translate_document("s1 s2 s3\n🙏\n\n3:16")
    assert document.text.split("\n")[1:] == ["🙏", "", "3:16"]


def test_an_empty_text_is_refused_by_name_in_calls_and_documents_as_on_every_face(translator):
    with pytest.raises(EmptySentence, match="^sentence 2 is empty$"):
        translator.translate(["s1 s2", " "])
    with pytest.raises(EmptySentence, match="^the sentence is empty$"):
        translator.translate([""])
    with pytest.raises(EmptySentence, match="^the text is empty$"):
        translator.translate_document(" \n\n ")
    checked = translator.checked_sentence("s1 s2", "sentence 1")
    assert (checked.encoded, checked.tokens) == ("s1 s2", 3)
    assert translator.translate([checked])[0].text == translator.translate(["s1 s2"])[0].text


def test_sentences_no_longer_wanted_leave_at_their_batch_and_the_rest_are_as_if_alone(translator):
    """``still_wanted`` is asked as each batch is reached: a sentence it drops gets None, a
    batch left empty is skipped, and each kept sentence's translation and score are those
    it has translated alone (its batch's padding trimmed to what the kept rows need)."""
    lines = _sentences(12, seed=21)
    asked = []

    def still_wanted(index):
        asked.append(index)
        return index % 3 != 0 and not 8 <= index < 12  # every third out, and 8 to 11

    results = translator.translate(lines, max_sentences=4, still_wanted=still_wanted)
    assert sorted(asked) == list(range(12))
    for index, result in enumerate(results):
        if index % 3 == 0 or index >= 8:
            assert result is None
        else:
            alone = translator.translate([lines[index]])[0].best
            assert result.best.text == alone.text and abs(result.best.score - alone.score) < 1e-4
