"""Text in and out of the model's tokens: one codec, which owns every step between them.

Encoding is fairseq-interactive's encode_fn (tokenizer, then BPE) and the source
dictionary's lookup (``source_tokens``); decoding is the target dictionary's ``string``
with ``--post-process``, then BPE and the tokenizer undone (decode_fn). Unknown-word
replacement (§5.1) is part of decoding here and nowhere else in the inference core: the
dictionary ``--replace-unk`` names (``load_unk_dictionary``), and a hypothesis' <unk>
replaced by the source word its attention points at (``unk_replaced_text``, over
``modules/unk_replacement.py``'s paper rule). fairseq-interactive's ``--replace-unk`` fix
(``compat/replace_unk.py``) and ``fconv-unk-dict`` (``cli/unk_dict.py``) call these.
A sentence is checked once (``checked_sentence``, which makes a ``CheckedSentence``); one
without a word to translate passes through (``nothing_to_translate``).
fairseq's ``--tokenizer moses`` gives back programming names and quotation marks as written
(``moses_encode``, ``moses_decode``: ``fconv_onnx/moses_round_trip.py``'s rule, which
fairseq's own commands get through ``compat/moses_round_trip.py``).
"""

import os
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from fairseq.data import Dictionary
from fairseq.data.encoders.moses_tokenizer import MosesTokenizer
from fairseq.tasks import FairseqTask
from fairseq.tokenizer import tokenize_line

from fconv_onnx import moses_round_trip

from ..errors import EmptySentence, FConvError, TooLong
from ..modules.unk_replacement import attended_source_positions, replace_unknown_words
from .results import Hypothesis, Translation


def moses_encode(tokenizer: MosesTokenizer, line: str) -> str:
    """fairseq's ``--tokenizer moses`` encoding ``line``, C++ and C# kept whole."""
    return moses_round_trip.tokenize(tokenizer.tok, line, aggressive_dash_splits=not tokenizer.cfg.moses_no_dash_splits,
                                     escape=not tokenizer.cfg.moses_no_escape)


def moses_decode(tokenizer: MosesTokenizer, text: str) -> str:
    """fairseq's ``--tokenizer moses`` decoding ``text``, quotation marks attached to what they enclose."""
    return moses_round_trip.detokenize(tokenizer.detok, text)


class TextCodec:
    """A task's tokenizer, BPE and dictionaries, with ``--post-process`` and the
    ``--replace-unk`` dictionary of the options it was built from."""

    def __init__(self, task, cfg):
        self.task = task
        self.tokenizer = task.build_tokenizer(cfg.tokenizer)
        self.bpe = task.build_bpe(cfg.bpe)
        self.post_process = cfg.common_eval.post_process
        self.unk_dictionary = load_unk_dictionary(cfg.generation.replace_unk)

    def encode(self, line: str) -> str:
        """Tokenizer, then BPE: what the model's dictionary reads (fairseq-interactive's encode_fn)."""
        if isinstance(self.tokenizer, MosesTokenizer):
            line = moses_encode(self.tokenizer, line)
        elif self.tokenizer is not None:
            line = self.tokenizer.encode(line)
        if self.bpe is not None:
            line = self.bpe.encode(line)
        return line

    def decode(self, text: str) -> str:
        """BPE, then the tokenizer, undone (fairseq-interactive's decode_fn)."""
        if self.bpe is not None:
            text = self.bpe.decode(text)
        if isinstance(self.tokenizer, MosesTokenizer):
            text = moses_decode(self.tokenizer, text)
        elif self.tokenizer is not None:
            text = self.tokenizer.decode(text)
        return text

    def unk_dictionary_for(self, replace_unk) -> Optional[Dict[str, str]]:
        """A call's ``replace_unk`` (None: as the options gave it) as a dictionary, or None (off)."""
        return self.unk_dictionary if replace_unk is None else load_unk_dictionary(replace_unk)

    def hypothesis_text(self, token_ids: List[int], strip, unk_dictionary: Optional[Dict[str, str]] = None,
                        attention: Optional[torch.Tensor] = None, source_row: Optional[torch.Tensor] = None,
                        encoded_source: str = "") -> str:
        """A hypothesis' tokens as text before ``decode`` (fairseq-interactive's H line): the
        target dictionary's string without ``strip``, with every <unk> replaced where
        ``unk_dictionary`` is given (the hypothesis' ``attention`` over ``source_row``, the
        words of ``encoded_source``)."""
        tgt_dict = self.task.target_dictionary
        if unk_dictionary is None:
            return tgt_dict.string(token_ids, self.post_process, extra_symbols_to_ignore=strip)
        src_dict = self.task.source_dictionary
        positions = attended_source_positions(attention.float().cpu(), source_row, src_dict.pad(), src_dict.eos())
        return unk_replaced_text(torch.tensor(token_ids, dtype=torch.int), positions, encoded_source.split(), tgt_dict,
                                 unk_dictionary, strip, self.post_process)


def source_token_count(encoded: str) -> int:
    """Source tokens a line is after tokenizer and BPE, as the model reads it: its words and </s>."""
    return len(encoded.split()) + 1


def check_sentence(encoded: str, limit: int, where: str = "the sentence", word: bool = False) -> int:
    """The rule a sentence the model is to read must meet, after tokenizer and BPE: its source
    tokens, or ``EmptySentence`` / ``TooLong`` (``word``: a document's piece that is a single
    word). ``checked_sentence`` applies it; the edges word its errors each in their own form."""
    if not encoded.strip():
        raise EmptySentence(where)
    count = source_token_count(encoded)
    if count > limit:
        raise TooLong(where, count, limit, word)
    return count


@dataclass(frozen=True)
class CheckedSentence:
    """A sentence as the model will read it, checked once (``checked_sentence``): its text,
    the text after tokenizer and BPE, and its source tokens (</s> counted). The layers after
    the check take it as it is: none checks or encodes it again."""

    text: str
    encoded: str
    tokens: int


def checked_sentence(text: str, encode: Callable[[str], str], limit: int, where: str = "the sentence",
                     word: bool = False, passes_through: bool = True) -> CheckedSentence:
    """The core's one check of a sentence: ``text`` encoded (``encode``: tokenizer, then BPE)
    and held to ``check_sentence``. An empty text (nothing but spaces) is refused on every
    face: ``EmptySentence``, worded by each edge (422 native, 400 LibreTranslate's, a skipped
    line in fairseq-interactive, the error itself in the Python API). A text without a word
    (``nothing_to_translate``) is never decoded by the core, so it is held to no length: it
    passes through (``passes_through=False``: a caller that decodes it, fairseq-interactive)."""
    if not text.strip():
        raise EmptySentence(where)
    encoded = encode(text)
    if passes_through and nothing_to_translate(text):
        return CheckedSentence(text, encoded, source_token_count(encoded))
    return CheckedSentence(text, encoded, check_sentence(encoded, limit, where, word))


def source_tokens(task, encoded: Sequence[str]) -> Tuple[List[torch.Tensor], List[int]]:
    """``task.get_interactive_tokens_and_lengths`` of encoded lines: each line's source ids
    (its words, then </s>) as int64, and their counts. Where the task and its source
    dictionary are fairseq's own, the same ids from one list per line instead of
    ``encode_line``'s tensor write per word: with decoding workers that lookup, done before
    the first batch leaves, was 40% of the calling process' time."""
    dictionary = task.source_dictionary
    if (type(task).get_interactive_tokens_and_lengths is not FairseqTask.get_interactive_tokens_and_lengths
            or type(dictionary).encode_line is not Dictionary.encode_line
            or type(dictionary).index is not Dictionary.index):
        return task.get_interactive_tokens_and_lengths(list(encoded), lambda line: line)
    indices, unk, eos = dictionary.indices, dictionary.unk_index, dictionary.eos_index
    tokens = [torch.tensor([indices.get(word, unk) for word in tokenize_line(line)] + [eos], dtype=torch.long)
              for line in encoded]
    return tokens, [t.numel() for t in tokens]


def load_unk_dictionary(replace_unk) -> Optional[Dict[str, str]]:
    """``--replace-unk``'s value as a dictionary: None (off), {} (copy the source word), or
    the ``source target`` pairs of a file. A bare ``--replace-unk`` reaches fairseq as "@@ "."""
    if replace_unk is None or replace_unk is False:
        return None
    if replace_unk is True or (isinstance(replace_unk, str) and replace_unk.strip() in ("", "@@")):
        return {}
    if isinstance(replace_unk, dict):
        return dict(replace_unk)
    if not os.path.isfile(replace_unk):
        raise FConvError(f"--replace-unk {replace_unk}: no such file; give a 'source target' dictionary or no value to copy source words")
    dictionary = {}
    with open(replace_unk, encoding="utf-8") as f:
        for line in f:
            columns = line.split()
            if len(columns) >= 2:
                dictionary[columns[0]] = columns[1]
    return dictionary


def unk_replaced_text(hypo_tokens, attended_positions, source_words, tgt_dict, unk_dictionary, ignore, remove_bpe) -> str:
    """The hypothesis' text with every <unk> replaced (§5.1), then BPE removed as
    fairseq's ``--post-process`` does."""
    from fairseq.data import data_utils

    words = replace_unknown_words(hypo_tokens, attended_positions, source_words, tgt_dict, unk_dictionary, set(ignore))
    text = " ".join(words)
    return data_utils.post_process(text, remove_bpe) if remove_bpe is not None else text


# links and addresses: not words to translate
LINK = re.compile(r"(?i)\b(?:https?://|www\.)\S+|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def nothing_to_translate(sentence: str) -> bool:
    """Whether ``sentence`` holds no word: no letter outside links and e-mail addresses
    (emoji, punctuation, numbers, a URL alone). Such a line passes through unchanged."""
    return not any(unicodedata.category(character).startswith("L") for character in LINK.sub(" ", sentence))


def passed_through(sentence: str, eos: int) -> Translation:
    """A line with nothing to translate, as its own translation (score 0: nothing was decoded)."""
    return Translation(sentence, [Hypothesis(text=sentence, tokens=[eos], score=0.0, positional_scores=[0.0],
                                             alignment=[])])
