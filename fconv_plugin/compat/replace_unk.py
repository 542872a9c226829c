"""``--replace-unk`` in fairseq-generate and fairseq-interactive, as in the paper.

Gehring et al. (2017, §5.1): "unknown words are replaced by looking up the source
word with the maximum attention score (averaged over all attention layers) in a
precomputed dictionary; if the dictionary has no translation, the source word is
copied". fairseq 0.12 cannot do this: fairseq-generate refuses binarised data,
then crashes on the empty alignment its generator returns (fairseq issue #3533), and
fairseq-interactive looks the word up in a source string that already reads
``<unk>``. This module mends exactly those places:

- the generator built for ``--replace-unk`` attaches to each hypothesis, for every
  target position, the attended source word: the real source token (not padding,
  not end of sentence) with the largest averaged attention, and the original word
  there (from the raw text, before the dictionary turned it into ``<unk>``);
- ``post_process_prediction`` replaces each ``<unk>`` token by the dictionary's
  translation of that word, or the word itself, before BPE is removed;
- binarised datasets read their original text from the raw file beside them, the
  one ``fairseq-preprocess --dataset-impl raw`` writes (e.g. data-bin/test.de-en.de);
- fairseq-interactive keeps each input line as tokenised and BPE-encoded.
"""

import os
import sys
from argparse import Namespace
from typing import Dict, List, Optional

import torch
from fairseq import utils as fairseq_utils
from fairseq.data import data_utils, indexed_dataset
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.tasks import FairseqTask

from ..errors import FConvError
from ._patching import patch
from .interactive_input import memoized

_context: Dict[str, object] = {"gen_subset": None, "batch_source_words": None}


class UnkAlignment:
    """For each target position of one hypothesis, the source word it attends to most.

    ``printed`` is the alignment fairseq computed for ``--print-alignment`` (hard pairs
    or soft rows, or None), handed back to fairseq's printing after the replacement.
    """

    def __init__(self, source_positions: List[int], source_words: Optional[List[str]], printed=None):
        self.source_positions = source_positions
        self.source_words = source_words
        self.printed = printed

    def attended_word(self, target_position: int) -> Optional[str]:
        if not self.source_words or target_position >= len(self.source_positions):
            return None
        return self.source_words[self.source_positions[target_position]]


def attended_source_positions(attention: torch.Tensor, src_tokens: torch.Tensor, pad: int, eos: int) -> List[int]:
    """argmax_j of the averaged attention per target position, over real source words.

    ``attention`` is src_len x tgt_len (padded source); the result indexes the real
    words in order, i.e. the whitespace-separated words of the original source line.
    """
    real = (src_tokens.ne(pad) & src_tokens.ne(eos)).nonzero().view(-1)
    if real.numel() == 0:
        return []
    return attention.index_select(0, real).argmax(dim=0).tolist()


def replace_unknown_words(hypo_tokens, alignment: UnkAlignment, tgt_dict, align_dict, ignore) -> List[str]:
    """The hypothesis' tokens with every ``<unk>`` replaced (§5.1), special symbols dropped."""
    words = []
    for position, index in enumerate(hypo_tokens.tolist()):
        if index in ignore or index == tgt_dict.pad():
            continue
        source_word = alignment.attended_word(position) if index == tgt_dict.unk() else None
        words.append(tgt_dict[index] if source_word is None else align_dict.get(source_word, source_word))
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
        source_words = _source_words(self._task, sample)
        pad, eos = self._task.source_dictionary.pad(), self._task.source_dictionary.eos()
        for row, sentence_hypos in enumerate(hypos):
            words = source_words[row] if source_words is not None else None
            real = int((src_tokens[row].ne(pad) & src_tokens[row].ne(eos)).sum())
            if words is not None and len(words) != real:
                raise FConvError(
                    f"--replace-unk: the original text of sentence {row} has {len(words)} words but the model "
                    f"read {real} tokens; the raw text beside the binarised data is not the text that was binarised"
                )
            for hypo in sentence_hypos:
                if hypo["attention"].numel() == 0:
                    raise FConvError("--replace-unk needs the decoder's attention, but the model returned none")
                positions = attended_source_positions(hypo["attention"], src_tokens[row], pad, eos)
                hypo["alignment"] = UnkAlignment(positions, words, printed=hypo.get("alignment"))
        return hypos


def _source_words(task, sample) -> Optional[List[List[str]]]:
    batch_words = _context["batch_source_words"]
    if batch_words is not None:
        _context["batch_source_words"] = None
        return batch_words
    subset = _context["gen_subset"]
    if subset is None or "id" not in sample:
        return None
    source = task.dataset(subset).src
    return [source.get_original_text(i).split() for i in sample["id"].tolist()]


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
        hypo_str = " ".join(replace_unknown_words(hypo_tokens, alignment, tgt_dict, align_dict, ignore))
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
        _context["gen_subset"] = cfg.dataset.gen_subset
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
                _context["batch_source_words"] = [encode_fn(lines[i]).split() for i in batch.ids.tolist()]
            yield batch

    return make_batches


def install() -> None:
    import fairseq_cli.generate as fairseq_generate
    import fairseq_cli.interactive as fairseq_interactive

    patch(fairseq_utils, "post_process_prediction", "replace_unk", _post_process_prediction)
    patch(fairseq_utils, "load_align_dict", "replace_unk", _load_align_dict)
    patch(FairseqTask, "build_generator", "replace_unk", _build_generator)
    patch(fairseq_generate, "main", "replace_unk", _generate_main, fairseq_generate)
    patch(fairseq_interactive, "make_batches", "replace_unk", _make_batches)
    for dataset_cls in (indexed_dataset.MMapIndexedDataset, indexed_dataset.IndexedDataset):
        if not hasattr(dataset_cls, "get_original_text"):
            dataset_cls.get_original_text = _original_text_beside_binarised_data
