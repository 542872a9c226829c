"""The paper's replacement rule on hand-checked cases (the CLI tests run it end to end)."""

import torch

from fconv_plugin.modules.unk_replacement import attended_source_positions, replace_unknown_words
from tests.support import make_dictionary

PAD, EOS = 1, 2


def test_the_most_attended_real_source_word_is_chosen_never_padding_or_eos():
    src = torch.tensor([PAD, PAD, 7, 8, 9, EOS])
    attention = torch.tensor([  # src_len x tgt_len
        [0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0],
        [0.6, 0.1, 0.1],
        [0.3, 0.2, 0.1],
        [0.1, 0.3, 0.2],
        [0.0, 0.4, 0.6],  # eos gets the most attention for targets 1 and 2
    ])
    assert attended_source_positions(attention, src, PAD, EOS) == [0, 2, 2]


def test_unks_take_the_dictionary_translation_or_the_source_word():
    tgt_dict = make_dictionary(5, "t")
    unk = tgt_dict.unk()
    hypo = torch.tensor([tgt_dict.index("t1"), unk, unk, tgt_dict.eos()])
    words = replace_unknown_words(hypo, [0, 1, 2, 2], ["Haus", "Müller", "Tisch"], tgt_dict, {"Tisch": "table"},
                                  ignore={tgt_dict.eos()})
    assert words == ["t1", "Müller", "table"]


def test_without_source_words_an_unk_stays_unk():
    tgt_dict = make_dictionary(5, "t")
    hypo = torch.tensor([tgt_dict.unk(), tgt_dict.index("t2"), tgt_dict.pad()])
    assert replace_unknown_words(hypo, [0, 0], None, tgt_dict, {}, ignore=set()) == ["<unk>", "t2"]
