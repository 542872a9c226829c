"""Raw sentence ↔ token ids, as fairseq-interactive does it.

Tokenise (fairseq's ``--tokenizer moses``: sacremoses with its options), apply BPE
(``--bpe subword_nmt``), split on whitespace and look each symbol up (unknown ones
become <unk>), then append </s>. Back: symbols joined by spaces without </s>, BPE
joins removed, Moses detokenisation.
"""

import os
import re
from typing import List, Optional

from . import moses_round_trip
from .manifest import BPEOptions, MosesOptions

SPACES = re.compile(r"\s+")  # fairseq's tokenize_line


class Vocabulary:
    """A fairseq dictionary written as one symbol per line, in index order."""

    def __init__(self, path: str, unk: int, eos: int, pad: int, bos: int):
        with open(path, encoding="utf-8") as f:
            self.symbols = [line.rstrip("\n") for line in f]
        self.indices = {}
        for index, symbol in enumerate(self.symbols):
            self.indices.setdefault(symbol, index)
        self.unk, self.eos, self.pad, self.bos = unk, eos, pad, bos

    def __len__(self) -> int:
        return len(self.symbols)

    def encode(self, line: str) -> List[int]:
        """fairseq's ``Dictionary.encode_line(line, add_if_not_exist=False)``."""
        words = SPACES.sub(" ", line).strip().split()
        return [self.indices.get(word, self.unk) for word in words] + [self.eos]

    def string(self, ids) -> str:
        """fairseq's ``Dictionary.string``: </s> and <s> left out, <unk> written as such."""
        skip = {self.eos, self.bos}
        return " ".join(self.symbols[i] for i in ids if i not in skip)


class TextPipeline:
    """The tokenizer and BPE a manifest names (either may be absent); ``directory`` holds the codes."""

    def __init__(self, tokenizer: Optional[MosesOptions], bpe: Optional[BPEOptions], directory: str):
        self.moses_tokenizer = self.moses_detokenizer = self.bpe = None
        if tokenizer:
            from sacremoses import MosesDetokenizer, MosesTokenizer

            self.moses_tokenizer = MosesTokenizer(tokenizer.source_lang)
            self.moses_detokenizer = MosesDetokenizer(tokenizer.target_lang)
            self.aggressive_dash_splits = tokenizer.aggressive_dash_splits
            self.escape = tokenizer.escape
        if bpe:
            from subword_nmt.apply_bpe import BPE

            with open(os.path.join(directory, bpe.codes), encoding="utf-8") as codes:
                self.bpe = BPE(codes, -1, bpe.separator, None, None)
            self.bpe_symbol = bpe.separator + " "

    def encode(self, line: str) -> str:
        if self.moses_tokenizer is not None:
            line = moses_round_trip.tokenize(self.moses_tokenizer, line, self.aggressive_dash_splits, self.escape)
        if self.bpe is not None:
            line = self.bpe.process_line(line)
        return line

    def decode(self, line: str) -> str:
        if self.bpe is not None:
            line = (line + " ").replace(self.bpe_symbol, "").rstrip()
        if self.moses_detokenizer is not None:
            line = moses_round_trip.detokenize(self.moses_detokenizer, line)
        return line
