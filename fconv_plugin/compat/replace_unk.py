"""``--replace-unk`` in fairseq-generate and fairseq-interactive, as in the paper.

The rule itself (§5.1) is ``fconv_plugin.modules.unk_replacement``. fairseq 0.12
cannot apply it: fairseq-generate refuses binarised data, then crashes on the empty
alignment its generator returns (fairseq issue #3533), and fairseq-interactive looks
the word up in a source string that already reads ``<unk>``. This module mends
exactly those places, carrying what the replacement needs on the hypotheses:

- the generator built for ``--replace-unk`` attaches to each hypothesis an
  ``UnkAlignment``: for every target position the attended real source word;
- fairseq-generate hands ``post_process_prediction`` the original source line (read
  from the raw text file beside binarised data, the one ``fairseq-preprocess
  --dataset-impl raw`` writes, e.g. data-bin/test.de-en.de), whose words are looked up;
- fairseq-interactive's batches record each line's words as tokenised and BPE-encoded
  in ``INTERACTIVE_SOURCE_WORDS``, keyed by the batch's source tensor (until it is
  freed), which its sample hands to the generator unchanged on CPUs;
- ``post_process_prediction`` replaces each ``<unk>`` before BPE is removed.
"""

import os
import sys
import weakref
from argparse import Namespace
from typing import Dict, List, Optional

from fairseq import utils as fairseq_utils
from fairseq.data import data_utils, indexed_dataset
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.tasks import FairseqTask

from ..errors import FConvError
from ..modules.unk_replacement import attended_source_positions, replace_unknown_words
from ._patching import patch, running_cli_module
from .interactive_input import memoized

# fairseq-interactive: the words of a batch's lines, by the id of the batch's src_tokens
# tensor. The one place this state lives; an entry goes when fairseq drops the tensor.
INTERACTIVE_SOURCE_WORDS: Dict[int, List[List[str]]] = {}


def remember_source_words(src_tokens, words: List[List[str]]) -> None:
    """Record the words of the batch whose source tensor is ``src_tokens``."""
    INTERACTIVE_SOURCE_WORDS[id(src_tokens)] = words
    weakref.finalize(src_tokens, INTERACTIVE_SOURCE_WORDS.pop, id(src_tokens), None)


def recorded_source_words(src_tokens) -> Optional[List[List[str]]]:
    """The words recorded for this very tensor, or None (fairseq-generate)."""
    return INTERACTIVE_SOURCE_WORDS.get(id(src_tokens))


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
        hypos = self._generator.generate(models, sample, **kwargs)
        src_tokens = sample["net_input"]["src_tokens"]
        batch_words = recorded_source_words(src_tokens)
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


def _load_align_dict(original):
    def load_align_dict(replace_unk):
        # a bare --replace-unk arrives as fairseq's argparse_const "@@ ": copy source words
        if isinstance(replace_unk, str) and replace_unk.strip() in ("", "@@"):
            return {}
        if replace_unk is not None and not os.path.isfile(replace_unk):
            raise FConvError(f"--replace-unk {replace_unk}: no such file; give a 'source target' dictionary or no value to copy source words")
        return original(replace_unk)

    return load_align_dict


def _post_process_prediction(original):
    def post_process_prediction(hypo_tokens, src_str, alignment, align_dict, tgt_dict, remove_bpe=None, extra_symbols_to_ignore=None):
        if align_dict is None or not isinstance(alignment, UnkAlignment):
            return original(hypo_tokens, src_str, alignment, align_dict, tgt_dict, remove_bpe, extra_symbols_to_ignore)
        ignore = set(extra_symbols_to_ignore or ()) | {tgt_dict.eos()}
        source_words = alignment.words_of(src_str)
        words = replace_unknown_words(hypo_tokens, alignment.source_positions, source_words, tgt_dict, align_dict, ignore)
        hypo_str = " ".join(words)
        if remove_bpe is not None:
            hypo_str = data_utils.post_process(hypo_str, remove_bpe)
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
        if isinstance(cfg, Namespace):
            cfg = convert_namespace_to_omegaconf(cfg)
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


def _make_batches(original):
    def make_batches(lines, cfg, task, max_positions, encode_fn):
        encode_fn = memoized(encode_fn)  # shared with the wrapped make_batches and fairseq
        for batch in original(lines, cfg, task, max_positions, encode_fn):
            if cfg.generation.replace_unk is not None:
                words = [encode_fn(lines[i]).split() for i in batch.ids.tolist()]
                remember_source_words(batch.src_tokens, words)
            yield batch

    return make_batches


def install() -> None:
    patch(fairseq_utils, "post_process_prediction", "replace_unk", _post_process_prediction)
    patch(fairseq_utils, "load_align_dict", "replace_unk", _load_align_dict)
    patch(FairseqTask, "build_generator", "replace_unk", _build_generator)
    fairseq_generate = running_cli_module("fairseq_cli.generate")
    if fairseq_generate is not None:
        patch(fairseq_generate, "main", "replace_unk", _generate_main, fairseq_generate)
    fairseq_interactive = running_cli_module("fairseq_cli.interactive")
    if fairseq_interactive is not None:
        patch(fairseq_interactive, "make_batches", "replace_unk", _make_batches)
    for dataset_cls in (indexed_dataset.MMapIndexedDataset, indexed_dataset.IndexedDataset):
        if not hasattr(dataset_cls, "get_original_text"):
            dataset_cls.get_original_text = _original_text_beside_binarised_data
