"""The --replace-unk glue: dictionary files and where the source words come from."""

import pytest
import torch
from fairseq import utils as fairseq_utils

from fconv_plugin.compat.replace_unk import SourceTokens, UnkAlignment, source_words_of, with_source_words
from fconv_plugin.errors import FConvError


def test_a_missing_dictionary_file_is_named():
    with pytest.raises(FConvError, match="--replace-unk /no/such/dict.txt: no such file"):
        fairseq_utils.load_align_dict("/no/such/dict.txt")
    assert fairseq_utils.load_align_dict("@@ ") == {}  # a bare --replace-unk: copy source words


def test_words_carried_by_the_batch_win_over_the_printed_source_line():
    # fairseq-interactive prints the source from the dictionary, where the word is already <unk>
    alignment = UnkAlignment([1], source_length=2, source_words=["Haus", "Müller"])
    assert alignment.words_of("Haus <unk>") == ["Haus", "Müller"]


def test_the_original_line_must_have_as_many_words_as_the_model_read():
    alignment = UnkAlignment([0, 1], source_length=3)
    assert alignment.words_of("das Haus brennt") == ["das", "Haus", "brennt"]
    with pytest.raises(FConvError, match="the source line has 2 words but the model read 3 tokens"):
        alignment.words_of("das Haus")


def test_interactive_source_words_travel_on_their_tensor_and_nowhere_else():
    batch = torch.tensor([[4, 5, 2]])
    carried = with_source_words(batch, [["der", "Hund"]])
    assert isinstance(carried, SourceTokens) and torch.equal(carried.as_subclass(torch.Tensor), batch)
    assert carried.data_ptr() == batch.data_ptr()  # the same storage: nothing copied
    assert source_words_of(carried) == [["der", "Hund"]]
    assert source_words_of(batch) is None  # the plain tensor carries nothing
    assert source_words_of(carried.clone()) is None  # an equal tensor is another batch
