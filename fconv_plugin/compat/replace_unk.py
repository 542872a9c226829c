"""``--replace-unk`` in fairseq-generate and fairseq-interactive, as in the paper.

The rule itself (§5.1) is ``fconv_plugin.modules.unk_replacement``; the text it gives
and the dictionary it reads are the inference core's (``unk_replaced_text``,
``load_unk_dictionary``), which fconv-translate and fconv-serve use directly. fairseq
0.12 cannot apply it: fairseq-generate refuses binarised data, then crashes on the
empty alignment its generator returns (fairseq issue #3533), and fairseq-interactive
looks the word up in a source string that already reads ``<unk>``. This module mends
exactly those places, carrying what the replacement needs on the hypotheses:

- the generator built for ``--replace-unk`` attaches to each hypothesis an
  ``UnkAlignment``: for every target position the attended real source word;
- fairseq-generate hands ``post_process_prediction`` the original source line (read
  from the raw text file beside binarised data, the one ``fairseq-preprocess
  --dataset-impl raw`` writes, e.g. data-bin/test.de-en.de), whose words are looked up;
- fairseq-interactive's batches carry each line's words, as tokenised and BPE-encoded,
  on their source tensor itself (``SourceTokens``, made by ``interactive_input``), which
  fairseq hands unchanged from the batch to the generator;
- ``post_process_prediction`` replaces each ``<unk>`` before BPE is removed.
"""

import os
import sys
from argparse import Namespace
from typing import List, Optional

import torch
from fairseq import utils as fairseq_utils
from fairseq.data import indexed_dataset
from fairseq.tasks import FairseqTask

from ..errors import FConvError
from ..inference import load_unk_dictionary, unk_replaced_text
from ..modules.unk_replacement import attended_source_positions
from ._patching import patch, running_cli_module


class SourceTokens(torch.Tensor):
    """A batch's source token ids, carrying the words each row was made from (``words``).

    Binarisation turned unknown words into <unk>; the replacement needs them back.
    fairseq-interactive passes the batch's tensor itself to the generator, which takes
    the words off it and generates from a plain tensor."""

    words: List[List[str]]


def with_source_words(src_tokens: torch.Tensor, words: List[List[str]]) -> SourceTokens:
    """``src_tokens`` (the same storage) carrying ``words``, one list per row."""
    tokens = src_tokens.as_subclass(SourceTokens)
    tokens.words = words
    return tokens


def source_words_of(src_tokens: torch.Tensor) -> Optional[List[List[str]]]:
    """The words ``src_tokens`` carries, or None (fairseq-generate, or a copy of the tensor)."""
    return getattr(src_tokens, "words", None) if isinstance(src_tokens, SourceTokens) else None


class UnkAlignment:
    """What the replacement needs to know of one hypothesis.

    ``source_positions[t]`` is the real source word target position t attends to most;
    ``source_length`` how many real source words the model read; ``source_words``
    those words when the batch carried them (fairseq-interactive), else None and the
    original line handed to ``post_process_prediction`` is used (fairseq-generate).
    ``printed`` is the alignment fairseq computed for ``--print-alignment`` (or None),
    handed back to fairseq's printing after the replacement.
    """

    def __init__(self, source_positions: List[int], source_length: int,
                 source_words: Optional[List[str]] = None, printed=None):
        self.source_positions = source_positions
        self.source_length = source_length
        self.source_words = source_words
        self.printed = printed

    def words_of(self, original_line: Optional[str]) -> Optional[List[str]]:
        """The source words to look up: carried ones, or those of the original line."""
        if self.source_words is not None:
            return self.source_words
        if original_line is None:
            return None
        words = original_line.split()
        if len(words) != self.source_length:
            raise FConvError(
                f"--replace-unk: the source line has {len(words)} words but the model read {self.source_length} "
                "tokens; it needs the text that was binarised (for fairseq-generate, the raw text file beside the data)"
            )
        return words


class _UnkAligningGenerator:
    """Wraps a fairseq generator and attaches an UnkAlignment to every hypothesis."""

    def __init__(self, generator, task):
        self._generator = generator
        self._task = task

    def __getattr__(self, name):
        return getattr(self._generator, name)

    def generate(self, models, sample, **kwargs):
        src_tokens = sample["net_input"]["src_tokens"]
        batch_words = source_words_of(src_tokens)
        if isinstance(src_tokens, SourceTokens):  # the model computes with a plain tensor
            src_tokens = src_tokens.as_subclass(torch.Tensor)
            sample = {**sample, "net_input": {**sample["net_input"], "src_tokens": src_tokens}}
        hypos = self._generator.generate(models, sample, **kwargs)
        pad, eos = self._task.source_dictionary.pad(), self._task.source_dictionary.eos()
        for row, sentence_hypos in enumerate(hypos):
            real = int((src_tokens[row].ne(pad) & src_tokens[row].ne(eos)).sum())
            words = batch_words[row] if batch_words is not None else None
            if words is not None and len(words) != real:
                raise FConvError(f"--replace-unk: input line {row} has {len(words)} words but the model read {real} tokens")
            for hypo in sentence_hypos:
                if hypo["attention"].numel() == 0:
                    raise FConvError("--replace-unk needs the decoder's attention, but the model returned none")
                positions = attended_source_positions(hypo["attention"], src_tokens[row], pad, eos)
                hypo["alignment"] = UnkAlignment(positions, real, words, printed=hypo.get("alignment"))
        return hypos


def _original_text_beside_binarised_data(self, index: int) -> str:
    """The raw line ``index`` from the text file at the dataset's prefix path."""
    lines = getattr(self, "_fconv_original_lines", None)
    if lines is None:
        path = getattr(self, "_path", None) or getattr(self, "path", None)
        if not path or not os.path.isfile(path):
            raise FConvError(
                f"--replace-unk needs the original words, which binarisation replaced by <unk>: put the "
                f"tokenised text that was binarised into {path} (the file 'fairseq-preprocess --dataset-impl raw' "
                "writes), for the source and the target side"
            )
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
        if len(lines) != len(self):
            raise FConvError(f"--replace-unk: {path} has {len(lines)} lines but the binarised data has {len(self)} sentences")
        self._fconv_original_lines = lines
    return lines[index]


def _load_align_dict(_original):
    return load_unk_dictionary  # a bare --replace-unk arrives as "@@ ": copy source words


def _post_process_prediction(original):
    def post_process_prediction(hypo_tokens, src_str, alignment, align_dict, tgt_dict, remove_bpe=None, extra_symbols_to_ignore=None):
        if align_dict is None or not isinstance(alignment, UnkAlignment):
            return original(hypo_tokens, src_str, alignment, align_dict, tgt_dict, remove_bpe, extra_symbols_to_ignore)
        ignore = set(extra_symbols_to_ignore or ()) | {tgt_dict.eos()}
        hypo_str = unk_replaced_text(hypo_tokens, alignment.source_positions, alignment.words_of(src_str), tgt_dict,
                                     align_dict, ignore, remove_bpe)
        return tgt_dict.encode_line(hypo_str, add_if_not_exist=True), hypo_str, alignment.printed

    return post_process_prediction


def _build_generator(original):
    def build_generator(self, models, args, *rest, **kwargs):
        generator = original(self, models, args, *rest, **kwargs)
        if getattr(args, "replace_unk", None) is None:
            return generator
        return _UnkAligningGenerator(generator, self)

    return build_generator


def _generate_main(original, fairseq_generate):
    def main(cfg):
        if isinstance(cfg, Namespace):  # as fairseq-generate converts them (with the other fixes' reading)
            cfg = fairseq_generate.convert_namespace_to_omegaconf(cfg)
        if cfg.generation.replace_unk is None or cfg.dataset.dataset_impl == "raw":
            return original(cfg)
        # fairseq's main() refuses binarised data with --replace-unk; same checks otherwise
        if cfg.common_eval.path is None:
            raise FConvError("--path required for generation")
        if cfg.generation.sampling and cfg.generation.nbest != cfg.generation.beam:
            raise FConvError("--sampling requires --nbest to be equal to --beam")
        if cfg.common_eval.results_path is None:
            return fairseq_generate._main(cfg, sys.stdout)
        os.makedirs(cfg.common_eval.results_path, exist_ok=True)
        output_path = os.path.join(cfg.common_eval.results_path, f"generate-{cfg.dataset.gen_subset}.txt")
        with open(output_path, "w", buffering=1, encoding="utf-8") as h:
            return fairseq_generate._main(cfg, h)

    return main


def install() -> None:
    patch(fairseq_utils, "post_process_prediction", "replace_unk", _post_process_prediction)
    patch(fairseq_utils, "load_align_dict", "replace_unk", _load_align_dict)
    patch(FairseqTask, "build_generator", "replace_unk", _build_generator)
    fairseq_generate = running_cli_module("fairseq_cli.generate")
    if fairseq_generate is not None:
        patch(fairseq_generate, "main", "replace_unk", _generate_main, fairseq_generate)
    for dataset_cls in (indexed_dataset.MMapIndexedDataset, indexed_dataset.IndexedDataset):
        if not hasattr(dataset_cls, "get_original_text"):
            dataset_cls.get_original_text = _original_text_beside_binarised_data
