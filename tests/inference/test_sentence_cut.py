"""Where documents cut long sentences: as long as 90% of the training sources, read from a
data-bin that fairseq's own index writer made with hand-chosen lengths."""

import random

import pytest
import torch
from fairseq.data import indexed_dataset
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fconv_plugin.errors import FConvError
from fconv_plugin.inference.documents import cut_length, split_document
from fconv_plugin.inference.loading import trained_sentence_cut, trained_source_lengths
from tests.support import make_dictionary


def _binarise(prefix, lengths):
    builder = indexed_dataset.make_builder(f"{prefix}.bin", impl="mmap", vocab_size=100)
    for length in lengths:
        builder.add_item(torch.full((length,), 5, dtype=torch.int32))
    builder.finalize(f"{prefix}.idx")


def _task(data_bin, source="es", target="en"):
    return TranslationTask(TranslationConfig(data=str(data_bin), source_lang=source, target_lang=target),
                           make_dictionary(20), make_dictionary(20))


def test_the_train_splits_source_lengths_are_read_shards_and_either_pair_order(tmp_path):
    _binarise(tmp_path / "train.en-es.es", [3, 9, 4])  # the pair named the other way round
    _binarise(tmp_path / "train1.en-es.es", [7])
    _binarise(tmp_path / "train.en-es.en", [50, 60, 70])  # the target side: not counted
    _binarise(tmp_path / "valid.en-es.es", [99])  # not training
    assert sorted(trained_source_lengths(_task(tmp_path)).tolist()) == [3, 4, 7, 9]


def test_dictionaries_alone_give_no_lengths(tmp_path):
    (tmp_path / "dict.es.txt").write_text("")
    assert trained_source_lengths(_task(tmp_path)) is None


def test_the_cut_is_the_90th_percentile_bounded_by_the_length_bound_and_the_model():
    def cut(lengths, max_len_b, source_limit):
        return cut_length(None, source_limit, trained_sentence_cut(lengths, max_len_b))

    lengths = list(range(1, 101))  # 90% of these are at most 90 long
    assert cut(lengths, max_len_b=200, source_limit=1024) == 90
    rng = random.Random(3)
    shuffled = rng.sample(range(1000), 1000)
    ranked = sorted(shuffled)
    assert cut(shuffled, 2000, 5000) == ranked[899]  # the 900th of 1000
    assert cut(lengths, max_len_b=50, source_limit=1024) == 50  # no translation cut off
    assert cut(lengths, max_len_b=4, source_limit=1024) == 16
    assert cut(lengths, max_len_b=200, source_limit=30) == 30  # what the model reads
    assert cut(None, max_len_b=200, source_limit=1024) == 200  # no train split: the length bound
    assert cut_length(12, 1024, 200) == 12 and cut_length(5000, 1024, 200) == 1024  # asked, within the model


def test_a_cut_under_two_tokens_is_refused_in_one_line():
    with pytest.raises(FConvError, match="^--max-sentence-tokens must be at least 2, got 1$"):
        cut_length(1, None)


class WordTranslator:
    """What documents read of a translator; tokens are words, </s> counted."""

    source_limit = 1024
    languages = ("es", "en")

    def __init__(self, cut):
        self.sentence_cut = cut

    def encode(self, line):
        return line

    def token_count(self, encoded):
        return len(encoded.split()) + 1


def test_a_document_is_cut_at_the_translators_cut_unless_told_otherwise():
    sentence = " ".join(f"w{i}," for i in range(162))  # 162 words: one sentence, commas to cut at
    pieces = [piece.text for piece in split_document(WordTranslator(cut=48), sentence, "es").pieces]
    assert all(len(piece.split()) + 1 <= 48 for piece in pieces) and " ".join(pieces) == sentence
    assert len(pieces) == 4  # 47 + 47 + 47 + 21 words
    assert [piece.text for piece in split_document(WordTranslator(cut=48), sentence, "es",
                                                   max_sentence_tokens=200).pieces] == [sentence]
    assert len(split_document(WordTranslator(cut=48), sentence, "es", max_len_b=20).pieces) == 9  # 19 words each
