"""The format of an exported model's directory: one definition for the writer and the reader.

``fconv-export`` (``fconv_plugin.export``) writes a ``Manifest`` and the files it names;
``fconv-onnx-translate`` (this package) reads them. Both import this module, which
needs the standard library alone (no torch, fairseq, onnxruntime or fconv_plugin).

The directory::

    manifest.json    this manifest (FORMAT names its version)
    encoder.onnx     src_tokens (batch x src_len, left-padded, ending in </s>) -> keys,
                     values, length_scale
    decoder.onnx     one decoder step: tokens, position, keys, values, length_scale,
                     padding_mask, [src_tokens,] token_penalty, beam_scores, order,
                     state_0.. -> log_probs, cand_scores, cand_index, log_prob_sums,
                     new_state_0.. (src_tokens: copying models only); tokens (the newest)
                     and beam_scores hold sentences x beam hypotheses, order and the
                     states one row per hypothesis (the states as the previous step left
                     them, gathered in the beams' order by the step), the source inputs
                     one row per sentence (format 3 read the whole prefix, computed the
                     length scale at every step and took its states reordered, format 2
                     had no candidates, format 1 one source row per hypothesis)
    source.vocab     the source dictionary, one symbol per line in index order
    target.vocab     the target dictionary, likewise
    bpe.codes        subword-nmt's codes, when the model reads BPE
"""

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

FORMAT = "fconv-onnx/4"
MANIFEST_FILE = "manifest.json"
ENCODER_FILE = "encoder.onnx"
DECODER_FILE = "decoder.onnx"
SOURCE_VOCABULARY_FILE = "source.vocab"
TARGET_VOCABULARY_FILE = "target.vocab"
BPE_CODES_FILE = "bpe.codes"

ENCODER_INPUTS = ["src_tokens"]
ENCODER_OUTPUTS = ["keys", "values", "length_scale"]
DECODER_INPUTS = ["tokens", "position", "keys", "values", "length_scale", "padding_mask"]
COPY_INPUT = "src_tokens"  # a copying model's step reads its rows' source tokens, after padding_mask
# beam search's rules for the step as one row added to every hypothesis' log-probabilities, each
# hypothesis' cumulative score (the step graph chooses every sentence's 2 x beam best candidates),
# and the beams' order: the previous step's row each hypothesis extends (the graph reorders the states)
SEARCH_INPUTS = ["token_penalty", "beam_scores", "order"]
# log-probabilities (rows x vocabulary); the candidates (sentences x 2·beam, best first: their
# cumulative scores and flat indices beam · vocabulary + token); each row's sum of log-probabilities
# (NaN or +inf where a row has NaN or +inf, which the candidates do not rule on); then the new states
DECODER_OUTPUTS = ["log_probs", "cand_scores", "cand_index", "log_prob_sums"]


def decoder_inputs(copying: bool) -> List[str]:
    """The decoder step's inputs before its states."""
    return [*DECODER_INPUTS, *([COPY_INPUT] if copying else []), *SEARCH_INPUTS]


def state_names(count: int) -> Tuple[List[str], List[str]]:
    """The decoder step's state inputs and the outputs that hold their next values."""
    inputs = [f"state_{i}" for i in range(count)]
    return inputs, [f"new_{name}" for name in inputs]


class ManifestError(Exception):
    """A directory the runtime cannot read; the message says what to do."""


@dataclass(frozen=True)
class Symbols:
    """Indices of the special symbols: target side, then source side."""

    pad: int
    eos: int
    unk: int
    bos: int
    source_pad: int
    source_eos: int
    source_unk: int


@dataclass(frozen=True)
class MosesOptions:
    """fairseq's ``--tokenizer moses`` as it was given to the exporter."""

    source_lang: Optional[str]
    target_lang: Optional[str]
    aggressive_dash_splits: bool
    escape: bool
    name: str = "moses"


@dataclass(frozen=True)
class BPEOptions:
    """fairseq's ``--bpe subword_nmt``: the codes file in the directory and the separator."""

    separator: str = "@@"
    codes: str = BPE_CODES_FILE
    name: str = "subword_nmt"


@dataclass(frozen=True)
class Dimensions:
    encoder_embed_dim: int
    decoder_embed_dim: int
    source_vocabulary: int
    target_vocabulary: int
    decoder_states: List[Tuple[int, int]]  # (k - 1, in_channels) of each decoder convolution's state


@dataclass(frozen=True)
class Manifest:
    arch: Optional[str]
    source_lang: Optional[str]
    target_lang: Optional[str]
    dimensions: Dimensions
    max_source_positions: Optional[int]  # None: no position table, any length
    max_target_positions: Optional[int]
    symbols: Symbols
    tokenizer: Optional[MosesOptions]
    bpe: Optional[BPEOptions]
    int8: bool
    exported_with: Dict[str, object] = field(default_factory=dict)
    copying: bool = False  # a pointer-generator model: its step reads src_tokens (COPY_INPUT)
    left_pad_source: bool = True
    encoder: str = ENCODER_FILE
    decoder: str = DECODER_FILE
    source_vocabulary: str = SOURCE_VOCABULARY_FILE
    target_vocabulary: str = TARGET_VOCABULARY_FILE
    format: str = FORMAT

    def to_json(self) -> dict:
        data = asdict(self)
        data["dimensions"]["decoder_states"] = [list(shape) for shape in self.dimensions.decoder_states]
        return data

    @classmethod
    def from_json(cls, data: dict, where: str = MANIFEST_FILE) -> "Manifest":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else None
            raise ManifestError(f"{where} is format {found!r}, this runtime reads {FORMAT!r}; "
                                "export the checkpoint again with this version's fconv-export")
        try:
            dimensions = dict(data["dimensions"])
            dimensions["decoder_states"] = [tuple(shape) for shape in dimensions["decoder_states"]]
            fields = dict(data)
            fields.update(
                dimensions=Dimensions(**dimensions),
                symbols=Symbols(**data["symbols"]),
                tokenizer=MosesOptions(**data["tokenizer"]) if data.get("tokenizer") else None,
                bpe=BPEOptions(**data["bpe"]) if data.get("bpe") else None,
            )
            return cls(**fields)
        except (KeyError, TypeError) as e:
            raise ManifestError(f"{where} is incomplete or damaged ({type(e).__name__}: {e}); "
                                "export the checkpoint again") from None

    def write(self, directory: str) -> None:
        """manifest.json in ``directory`` (the exporter builds the whole directory atomically)."""
        with open(os.path.join(directory, MANIFEST_FILE), "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=2)

    @classmethod
    def read(cls, directory: str) -> "Manifest":
        path = os.path.join(directory, MANIFEST_FILE)
        if not os.path.isfile(path):
            raise ManifestError(f"{directory} has no {MANIFEST_FILE}; give a directory written by fconv-export")
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ManifestError(f"{path} is not valid JSON ({e.msg}); export the checkpoint again") from None
        return cls.from_json(data, path)
