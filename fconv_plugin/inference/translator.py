"""A trained model behind one call: sentences in, translations out, the way fairseq-interactive does it.

Every step but the search is fairseq's own public API (the task, the ensemble loader,
the task's batching of raw tokens, the dictionary's ``string``, BPE then tokenizer
decoding; the source dictionary's lookup in one list per line where the task and the
dictionary are fairseq's own, ``source_tokens``). The search is
``beam_search.BeamSearch``, fairseq's SequenceGenerator with
tensors throughout, for plain beam search with one model, and fairseq's generator
(``task.inference_step``) for anything else; either way a sentence's text is
fairseq-interactive's D- line for the same options. Options live on the call: the
model is never changed by one, and a call that wants the attention (alignments,
``--replace-unk``) generates with a view of the model that returns it
(``FConvModel.returning_attention``).
"""

import ast
import contextlib
import copy
import logging
import math
import os
import re
import threading
import unicodedata
import warnings
from collections import OrderedDict
from dataclasses import dataclass, fields, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from fairseq import checkpoint_utils, tasks, utils
from fairseq.data import Dictionary
from fairseq.tasks import FairseqTask
from fairseq.tokenizer import tokenize_line

from .. import precision
from ..checkpoint_io import loading_fairseq_checkpoints
from ..errors import FConvError
from ..deployment.int8 import Int8Weight
from ..modules.unk_replacement import attended_source_positions, replace_unknown_words
from .attention import layer_attention, readable
from ..decoding.search import BeamSearch
from .documents import translate_document
from .results import DocumentTranslation, Hypothesis, LayerAttention, Translation
from .workers import DecodingWorkers, check_workers

logger = logging.getLogger(__name__)

LN2 = math.log(2)
DEFAULT_MAX_TOKENS = 4000  # source tokens in one generation call when the options give no bound
TRAINED_LENGTH_PERCENTILE = 90  # documents cut sentences longer than this share of the training sources
# warnings the hosts give on every run that ask nothing of a user: hydra's deprecations as
# fairseq composes its configuration, torch's pin_memory on a machine without a GPU
HOST_NOTICES = (
    r"hydra\.experimental\.\w+\(\) is no longer experimental",
    r"\s*The version_base parameter is not specified",
    r"In 'config': Usage of deprecated keyword in package header",
    r"\s*'config' is validated against ConfigStore schema",
    r"\s*The strict flag in the compose API is deprecated",
    r"'pin_memory' argument is set as true but no accelerator is found",
)


@dataclass(frozen=True)
class GenerationOptions:
    """fairseq's generation options a call may set (its ``--beam``, ``--lenpen``, ...)."""

    beam: int = 5
    nbest: int = 1
    lenpen: float = 1.0
    unkpen: float = 0.0
    min_len: int = 1
    max_len_a: float = 0.0
    max_len_b: int = 200
    no_repeat_ngram_size: int = 0

    @classmethod
    def from_cfg(cls, generation) -> "GenerationOptions":
        return cls(**{f.name: getattr(generation, f.name) for f in fields(cls)})

    def check(self) -> None:
        if self.beam < 1 or self.nbest < 1 or self.nbest > self.beam:
            raise FConvError(f"beam {self.beam} and nbest {self.nbest}: give beam >= 1 and 1 <= nbest <= beam")


def source_token_count(encoded: str) -> int:
    """Source tokens a line is after tokenizer and BPE, as the model reads it: its words and </s>."""
    return len(encoded.split()) + 1


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


def language_pair(data: str, source_lang: Optional[str], target_lang: Optional[str]) -> Dict[str, str]:
    """The languages a translator reads and writes: as given, else as the data-bin's files
    name them (fairseq's ``infer_language_pair``, which fairseq's task runs too late for a
    ``--tokenizer`` that reads the source language). One line naming the choice where the
    files do not settle it."""
    if source_lang is not None and target_lang is not None:
        return {"source_lang": source_lang, "target_lang": target_lang}
    from fairseq.data.data_utils import infer_language_pair

    first = data.split(os.pathsep)[0]
    inferred = infer_language_pair(first) if os.path.isdir(first) else (None, None)
    if None in inferred:
        found = sorted(name[len("dict."):-len(".txt")] for name in os.listdir(first)
                       if name.startswith("dict.") and name.endswith(".txt")) if os.path.isdir(first) else []
        raise FConvError(f"which languages? {first} has the dictionaries of {', '.join(found) or 'none'} and no "
                         f"binarised split naming the pair; give --source-lang and --target-lang (-s and -t)")
    return {"source_lang": source_lang or inferred[0], "target_lang": target_lang or inferred[1]}


def trained_source_lengths(task) -> Optional["numpy.ndarray"]:
    """The source lengths (tokens with </s>) of the training split in the task's data-bin
    (``train``, ``train1``, ...: fairseq's shards), or None where the data-bin holds only
    the dictionaries. Read from the binarised index alone (fairseq's ``indexed_dataset``)."""
    from itertools import count

    import numpy
    from fairseq.data import indexed_dataset

    cfg = getattr(task, "cfg", None)
    source, target = getattr(cfg, "source_lang", None), getattr(cfg, "target_lang", None)
    if not getattr(cfg, "data", None) or not source or not target:
        return None
    data = utils.split_paths(cfg.data)[0]
    lengths = []
    for shard in count():
        split = "train" + (str(shard) if shard else "")
        for pair in (f"{source}-{target}", f"{target}-{source}"):
            prefix = os.path.join(data, f"{split}.{pair}.{source}")
            impl = indexed_dataset.infer_dataset_impl(prefix)
            if impl is not None:
                dataset = indexed_dataset.make_dataset(prefix, impl=impl, dictionary=task.source_dictionary)
                lengths.append(numpy.array(dataset.sizes))  # a copy: the index is unmapped with the dataset
                break
        else:
            break
    return numpy.concatenate(lengths) if lengths else None


def trained_sentence_cut(lengths: Optional["numpy.ndarray"], max_len_b: int, source_limit: int) -> int:
    """The longest piece (source tokens with </s>) a document's sentence is cut into: as long
    as ``TRAINED_LENGTH_PERCENTILE`` percent of the training sources, where the data-bin has
    them (on the quickstart's model, 162-word sentences looped at the old 200 tokens and
    read well at this percentile: docs/usage.md); never past the generation's length bound
    (``max(16, --max-len-b)``), so no translation is cut off, nor past what the model reads."""
    import numpy

    cut = max(16, max_len_b)
    if lengths is not None and len(lengths):
        cut = min(cut, int(numpy.percentile(lengths, TRAINED_LENGTH_PERCENTILE, method="inverted_cdf")))
    return max(2, min(cut, source_limit))


@contextlib.contextmanager
def without_host_notices():
    """``HOST_NOTICES`` not shown while this lasts; every other warning as before."""
    with warnings.catch_warnings():
        for pattern in HOST_NOTICES:
            warnings.filterwarnings("ignore", message=pattern, category=UserWarning)
        yield


def interactive_config(args):
    """fairseq-interactive's parsed options as the config a ``Translator`` takes, the
    languages filled in from the data-bin where none were given (``language_pair``): the
    one place the core's commands (fconv-translate, fconv-serve, ``from_pretrained``) convert."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    pair = language_pair(str(args.data), getattr(args, "source_lang", None), getattr(args, "target_lang", None))
    args.source_lang, args.target_lang = pair["source_lang"], pair["target_lang"]
    with without_host_notices():
        return convert_namespace_to_omegaconf(args)


def wanted_rows(batches, still_wanted: Callable[[int], bool], pad: int):
    """Each (ids, src_tokens, src_lengths) batch with only its sentences ``still_wanted``,
    asked as the batch is reached, without the padding columns only the others needed (a
    batch of those sentences alone); a batch with none left is skipped."""
    for ids, src_tokens, src_lengths in batches:
        keep = [row for row, index in enumerate(ids) if still_wanted(index)]
        if not keep:
            continue
        if len(keep) < len(ids):
            rows = torch.tensor(keep)
            src_tokens, src_lengths = src_tokens[rows], src_lengths[rows]
            src_tokens = src_tokens[:, src_tokens.ne(pad).any(dim=0)]
            ids = [ids[row] for row in keep]
        yield ids, src_tokens, src_lengths


def inference_device(cfg) -> torch.device:
    """Where a model runs, as fairseq-interactive decides: the GPU when there is one,
    unless ``--cpu``."""
    return torch.device("cuda" if torch.cuda.is_available() and not cfg.common.cpu else "cpu")


def has_int8_weights(model) -> bool:
    """Whether ``model`` is fconv-quantize's int8 form."""
    return any(isinstance(module, Int8Weight) for module in model.modules())


def place_model(model, cfg, device: torch.device,
                cpu_bf16_units: Callable[[], Optional[str]] = precision.bf16_units) -> None:
    """The model in ``--fp16`` or ``--bf16`` precision on ``device``. Half precision is for
    GPUs, int8 (fconv-quantize) for CPUs: other pairings get a one-line error. ``--bf16`` on
    a CPU with bfloat16 units (``cpu_bf16_units``) is training's: translating runs in float32,
    with a note (a CPU without them is refused, as in training)."""
    half = "--fp16" if cfg.common.fp16 else "--bf16" if cfg.common.bf16 else None
    int8 = has_int8_weights(model)
    if int8 and half:
        raise FConvError(f"an int8 model (fconv-quantize) computes in int8 and float32; drop {half}")
    if int8 and device.type != "cpu":
        raise FConvError("an int8 model (fconv-quantize) runs on the CPU; add --cpu")
    if half == "--bf16" and device.type == "cpu":
        logger.info(precision.decoding_in_float32(cpu_bf16_units(), half, "translating"))
        half = None
    elif half and device.type == "cpu":
        raise FConvError(f"{half} needs a GPU and none is in use; drop {half} (or --cpu) to translate in float32")
    if half == "--fp16":
        model.half()
    elif half == "--bf16":
        model.bfloat16()
    model.to(device)


@dataclass(frozen=True)
class BatchCall:
    """What every batch of one ``translate`` call shares."""

    options: GenerationOptions
    unk_dictionary: Optional[Dict[str, str]]
    alignment: bool
    attention: bool
    decode: bool = True


class Translator:
    """One model with its task, tokenizer and BPE, built from fairseq-interactive's options.

    ``Translator(cfg)`` takes fairseq-interactive's parsed options (what ``fconv-translate``
    and ``fconv-serve`` read from their command lines); ``Translator.from_pretrained``
    builds them from a checkpoint path and keyword options, as fairseq's hub does.
    ``search``: "vectorised" (``BeamSearch`` where it applies) or "fairseq" (fairseq's
    SequenceGenerator always: the reference it is measured against). ``sentence_cut``: the
    longest piece (source tokens) documents cut a sentence into; default from the training
    lengths (``trained_sentence_cut``), never past what the model reads."""

    SEARCHES = ("vectorised", "fairseq")

    def __init__(self, cfg, name: str = "default", search: str = "vectorised", sentence_cut: Optional[int] = None):
        if search not in self.SEARCHES:
            raise FConvError(f"search {search!r}: give one of {', '.join(self.SEARCHES)}")
        self.name = name
        self.search = search
        self.cfg = cfg
        if not cfg.common_eval.path:
            raise FConvError("--path is required: the checkpoint to translate with")
        for path in utils.split_paths(cfg.common_eval.path):
            if not os.path.isfile(path):
                raise FConvError(f"--path {path}: no such checkpoint file")
        self.task = tasks.setup_task(cfg.task)
        overrides = ast.literal_eval(cfg.common_eval.model_overrides)  # a literal, never executed
        with loading_fairseq_checkpoints(cfg.common_eval.path), without_host_notices():
            self.models, model_cfg = checkpoint_utils.load_model_ensemble(
                utils.split_paths(cfg.common_eval.path), arg_overrides=overrides, task=self.task,
                suffix=cfg.checkpoint.checkpoint_suffix, strict=(cfg.checkpoint.checkpoint_shard_count == 1),
                num_shards=cfg.checkpoint.checkpoint_shard_count,
            )
        self.device = inference_device(cfg)
        for model in self.models:
            model.prepare_for_inference_(cfg)
            place_model(model, cfg, self.device)
        self.arch = getattr(model_cfg.model, "arch", None) or getattr(model_cfg.model, "_name", "?")
        self.tokenizer = self.task.build_tokenizer(cfg.tokenizer)
        self.bpe = self.task.build_bpe(cfg.bpe)
        self.unk_dictionary = load_unk_dictionary(cfg.generation.replace_unk)
        self.max_positions = utils.resolve_max_positions(
            self.task.max_positions(), *[model.max_positions() for model in self.models]
        )
        self.defaults = GenerationOptions.from_cfg(cfg.generation)
        if sentence_cut is not None and sentence_cut < 2:
            raise FConvError(f"the sentence cut must be at least 2 tokens, got {sentence_cut}")
        self.sentence_cut = (min(sentence_cut, self.source_limit) if sentence_cut is not None else
                             trained_sentence_cut(trained_source_lengths(self.task), self.defaults.max_len_b,
                                                  self.source_limit))
        self.max_tokens = cfg.dataset.max_tokens
        self.max_sentences = cfg.dataset.batch_size
        self._default_batches = self.max_tokens is None and self.max_sentences is None
        if self._default_batches:
            self.max_tokens = DEFAULT_MAX_TOKENS
        self._generators: "OrderedDict[tuple, object]" = OrderedDict()
        self._attending_models: Optional[list] = None
        self._decoding_workers: Dict[int, DecodingWorkers] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_pretrained(cls, checkpoint: str, data: str, name: str = "default", search: str = "vectorised",
                        **options) -> "Translator":
        """A translator for ``checkpoint`` with the dictionaries in ``data``; ``options`` are
        fairseq-interactive's, by their Python names: ``source_lang="es", tokenizer="moses",
        bpe="subword_nmt", bpe_codes="codes", beam=5, replace_unk=True, max_tokens=2000``."""
        from fairseq import options as fairseq_options

        argv = [str(data), "--path", str(checkpoint)]
        for key, value in options.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value not in (None, False):
                argv += [flag, str(value)]
        parser = fairseq_options.get_interactive_generation_parser()
        return cls(interactive_config(fairseq_options.parse_args_and_arch(parser, argv)), name, search)

    # --- what the model reads ---------------------------------------------------------

    @property
    def source_limit(self) -> int:
        """How many source tokens (with </s>) the model reads."""
        limit = self.max_positions[0] if isinstance(self.max_positions, (tuple, list)) else self.max_positions
        return int(limit)

    @property
    def languages(self) -> Tuple[Optional[str], Optional[str]]:
        """(source, target) language codes as the task names them (-s/-t), or None."""
        task_cfg = getattr(self.task, "cfg", None)
        return getattr(task_cfg, "source_lang", None), getattr(task_cfg, "target_lang", None)

    @property
    def int8(self) -> bool:
        return has_int8_weights(self.models[0])

    @property
    def copying(self) -> bool:
        return getattr(self.models[0].decoder, "pointer_generator", None) is not None

    def describe(self) -> dict:
        return {
            "name": self.name,
            "arch": self.arch,
            "source_lang": self.languages[0],
            "target_lang": self.languages[1],
            "source_dictionary": len(self.task.source_dictionary),
            "target_dictionary": len(self.task.target_dictionary),
            "int8": self.int8,
            "copying": self.copying,
            "max_source_tokens": self.source_limit,
            "sentence_cut_tokens": self.sentence_cut,
            "attention_layers": self.models[0].decoder.num_attention_layers,
        }

    def encode(self, line: str) -> str:
        """Tokenizer, then BPE: what the model's dictionary reads (fairseq-interactive's encode_fn)."""
        if self.tokenizer is not None:
            line = self.tokenizer.encode(line)
        if self.bpe is not None:
            line = self.bpe.encode(line)
        return line

    def decode(self, text: str) -> str:
        """BPE, then the tokenizer, undone (fairseq-interactive's decode_fn)."""
        if self.bpe is not None:
            text = self.bpe.decode(text)
        if self.tokenizer is not None:
            text = self.tokenizer.decode(text)
        return text

    def token_count(self, encoded: str) -> int:
        """Source tokens an encoded line is, </s> included."""
        return source_token_count(encoded)

    # --- translation ------------------------------------------------------------------

    def translate(
        self,
        sentences: Sequence[str],
        *,
        alignment: bool = False,
        attention: bool = False,
        replace_unk: Union[None, bool, str, Dict[str, str]] = None,
        encoded: Optional[Sequence[str]] = None,
        decode: bool = True,
        max_tokens: Optional[int] = None,
        max_sentences: Optional[int] = None,
        progress: Optional[Callable[[int], None]] = None,
        workers: int = 1,
        still_wanted: Optional[Callable[[int], bool]] = None,
        **generation,
    ) -> List[Translation]:
        """Translate each sentence; results in the order given.

        ``generation``: ``beam``, ``nbest``, ``lenpen``, ``unkpen``, ``min_len``,
        ``max_len_a``, ``max_len_b``, ``no_repeat_ngram_size`` (default: the translator's
        options). ``alignment``: each hypothesis' (source, target) word pairs, as
        ``--print-alignment``; ``attention``: every layer's weights and, for copying
        models, p_gen; ``replace_unk``: None as the translator was built, False off, True
        to copy source words, or a dictionary (file path or dict). ``encoded``: the
        sentences after ``encode``, when the caller has them; ``decode=False``: each
        hypothesis' text before ``decode`` (the model's tokens, fairseq-interactive's H
        line), for a caller that decodes itself. ``progress(n)`` is called
        after each batch with the number of sentences it translated. ``workers``: batches
        decoded side by side in that many processes of one CPU thread each (``workers.py``;
        Marian's ``--cpu-threads``), with the same translations as in one process.
        ``still_wanted(i)``: asked for each sentence (its index here) just before its batch
        is translated; one it answers False for leaves the batch and gets None (a server's
        request whose client gave up; ``wanted_rows``).
        """
        options = replace(self.defaults, **generation)
        options.check()
        check_workers(workers, self.device)
        words = [i for i, sentence in enumerate(sentences) if not nothing_to_translate(sentence)]
        if len(words) < len(sentences):  # emoji, punctuation, numbers, links: the model would invent a sentence
            results = [passed_through(sentence, self.task.target_dictionary.eos()) for sentence in sentences]
            if words:
                translated = self.translate(
                    [sentences[i] for i in words], alignment=alignment, attention=attention, replace_unk=replace_unk,
                    encoded=None if encoded is None else [encoded[i] for i in words], decode=decode,
                    max_tokens=max_tokens, max_sentences=max_sentences, progress=progress, workers=workers,
                    still_wanted=None if still_wanted is None else (lambda i: still_wanted(words[i])), **generation)
                for i, translation in zip(words, translated):
                    results[i] = translation
            if progress is not None:
                progress(len(sentences) - len(words))
            return results
        unk_dictionary = self.unk_dictionary if replace_unk is None else load_unk_dictionary(replace_unk)
        encoded = [self.encode(s) for s in sentences] if encoded is None else list(encoded)
        if len(encoded) != len(sentences):
            raise FConvError(f"{len(sentences)} sentences but {len(encoded)} encoded ones; give one per sentence")
        self._check_lengths(encoded)
        call = BatchCall(options, unk_dictionary, alignment, attention, decode)
        batches = self._batches(encoded, max_tokens, max_sentences, workers)
        if still_wanted is not None:
            batches = wanted_rows(batches, still_wanted, self.task.source_dictionary.pad())
        jobs = ((call, ids, src_tokens, src_lengths, [sentences[i] for i in ids], [encoded[i] for i in ids])
                for ids, src_tokens, src_lengths in batches)
        done = ((job, self.translate_batch(*job)) for job in jobs) if workers == 1 else self._workers(workers).map(jobs)
        results: List[Optional[Translation]] = [None] * len(sentences)
        for job, translations in done:
            ids = job[1]
            for index, translation in zip(ids, translations):
                results[index] = translation
            if progress is not None:
                progress(len(ids))
        return results

    def translate_batch(self, call: "BatchCall", ids: List[int], src_tokens: torch.Tensor, src_lengths: torch.Tensor,
                        sentences: List[str], encoded: List[str]) -> List[Translation]:
        """One batch of ``_batches`` translated: a Translation per sentence, in ``ids``' order
        (``sentences`` and ``encoded`` are the batch's own). In this process or a decoding worker's."""
        options, unk_dictionary = call.options, call.unk_dictionary
        needs_attention = call.alignment or unk_dictionary is not None
        generator, models, search = self._generator(options, needs_attention)
        src_dict, tgt_dict = self.task.source_dictionary, self.task.target_dictionary
        strip = getattr(generator, "symbols_to_strip_from_output", {generator.eos})
        remove_bpe = self.cfg.common_eval.post_process
        on_device = src_tokens.to(self.device), src_lengths.to(self.device)
        if search is not None:
            batch_hypos = search.generate(*on_device, attention=needs_attention)
        else:
            sample = {"net_input": {"src_tokens": on_device[0], "src_lengths": on_device[1]}}
            batch_hypos = self.task.inference_step(generator, models, sample)
        translations = []
        for row, hypos in enumerate(batch_hypos[: len(ids)]):
            source_row = src_tokens[row]
            translation = Translation(sentences[row])
            for hypo in hypos[: options.nbest]:
                tokens = hypo["tokens"].int().cpu()
                token_ids = tokens.tolist()  # the dictionary reads ints ~30x faster than 0-d tensors
                if unk_dictionary is not None:
                    positions = attended_source_positions(hypo["attention"].float().cpu(), source_row, src_dict.pad(), src_dict.eos())
                    text = unk_replaced_text(tokens, positions, encoded[row].split(), tgt_dict, unk_dictionary,
                                             strip, remove_bpe)
                else:
                    text = tgt_dict.string(token_ids, remove_bpe, extra_symbols_to_ignore=strip)
                result = Hypothesis(
                    text=self.decode(text) if call.decode else text,
                    tokens=token_ids,
                    score=float(hypo["score"]) / LN2,
                    positional_scores=(hypo["positional_scores"].double() / LN2).tolist(),
                )
                if call.alignment:
                    pairs = utils.extract_hard_alignment(hypo["attention"].float().cpu().transpose(1, 0), source_row, tokens,
                                                         tgt_dict.pad(), tgt_dict.eos())
                    result.alignment = [(int(s), int(t)) for s, t in pairs]
                if call.attention:
                    result.attention, result.p_gen = self._teacher_forced(utils.strip_pad(source_row, src_dict.pad()), tokens)
                translation.hypotheses.append(result)
            translations.append(translation)
        return translations

    def _workers(self, workers: int) -> DecodingWorkers:
        """The decoding processes for ``workers`` (``workers.py``), started on first use and
        kept for later calls until ``close``; one set per count, so that calls in other
        threads with another count keep theirs."""
        with self._lock:
            pool = self._decoding_workers.get(workers)
            if pool is None or pool.broken:
                if pool is not None:
                    pool.close()
                for model in self.models:  # int8 weights packed here once, shared by the forked workers
                    for module in model.modules():
                        if isinstance(module, Int8Weight):
                            module.packed()
                pool = self._decoding_workers[workers] = DecodingWorkers(self, workers)
            return pool

    def adopt_in_worker(self) -> None:
        """Called in a decoding process forked from this translator's: it starts with no
        workers of its own and a lock no other thread of the parent can be holding."""
        self._lock = threading.Lock()
        self._decoding_workers = {}

    def close(self) -> None:
        """Stops the decoding processes, if any were started (``translate(workers=...)``)."""
        with self._lock:
            pools, self._decoding_workers = list(self._decoding_workers.values()), {}
        for pool in pools:
            pool.close()

    def translate_document(self, text: str, **options) -> DocumentTranslation:
        """``text`` translated with its paragraphs and line breaks (``documents.translate_document``)."""
        return translate_document(self, text, **options)

    def _check_lengths(self, encoded: Sequence[str]) -> None:
        for number, line in enumerate(encoded, start=1):
            where = f"sentence {number}" if len(encoded) > 1 else "the sentence"
            if not line.strip():
                raise FConvError(f"{where} is empty")
            count = self.token_count(line)
            if count > self.source_limit:
                raise FConvError(f"{where} has {count} tokens; the model reads at most {self.source_limit}; "
                                 "split it (translate_document splits long sentences itself)")

    def _batches(self, encoded: Sequence[str], max_tokens: Optional[int], max_sentences: Optional[int], workers: int = 1):
        """(input indices, src_tokens, src_lengths) of fairseq's batches: the task's own
        dataset for inference and batch iterator, as fairseq-interactive uses them. Where
        neither the call nor the options bound a batch, ``workers`` share the default
        bound (the same tokens in flight as one process, in more batches to share out),
        never below what one sentence may have."""
        if max_tokens is None and max_sentences is None:
            max_tokens, max_sentences = self.max_tokens, self.max_sentences
            if self._default_batches and workers > 1:
                max_tokens = max(DEFAULT_MAX_TOKENS // workers, min(self.source_limit, DEFAULT_MAX_TOKENS))
        tokens, lengths = source_tokens(self.task, encoded)
        with without_host_notices():  # the batches hold this call's sentences only
            batches = list(self.task.get_batch_iterator(
                dataset=self.task.build_dataset_for_inference(tokens, lengths),
                max_tokens=max_tokens, max_sentences=max_sentences, max_positions=self.max_positions,
                ignore_invalid_inputs=False, disable_iterator_cache=True,
            ).next_epoch_itr(shuffle=False))
        for batch in batches:
            yield batch["id"].tolist(), batch["net_input"]["src_tokens"], batch["net_input"]["src_lengths"]

    def _generator(self, options: GenerationOptions, attention: bool) -> Tuple[object, list, Optional[BeamSearch]]:
        """fairseq's generator for these options (kept for the next call with the same),
        the models it runs (the attention-returning views when ``attention``) and the
        vectorised search with its settings, or None where fairseq's must run."""
        key = (options, attention)
        with self._lock:
            if key in self._generators:
                self._generators.move_to_end(key)
                return self._generators[key]
            models = self.models
            if attention:
                if self._attending_models is None:
                    self._attending_models = [model.returning_attention() for model in self.models]
                models = self._attending_models
            generation = copy.deepcopy(self.cfg.generation)
            for name, value in vars(options).items():
                setattr(generation, name, value)
            generation.replace_unk = None  # done here, on the hypotheses
            generation.print_alignment = None  # likewise: fairseq's would re-run every hypothesis
            generator = self.task.build_generator(models, generation)
            search = BeamSearch.like(generator, models[0]) if self.search == "vectorised" else None
            entry = (generator, models, search)
            self._generators[key] = entry
            if len(self._generators) > 32:
                self._generators.popitem(last=False)
            return entry

    def _teacher_forced(self, src_tokens: torch.Tensor, target_tokens: torch.Tensor):
        """Each attention layer's weights (and p_gen) for one sentence and its translation."""
        model = self.models[0]
        layers, p_gen = layer_attention(model, src_tokens.to(self.device), target_tokens.long().to(self.device))
        src_dict, tgt_dict = self.task.source_dictionary, self.task.target_dictionary
        attention = LayerAttention(
            source=readable([src_dict[i] for i in src_tokens.tolist()]),
            target=readable([tgt_dict[i] for i in target_tokens.tolist()]),
            layers=[layer.float().tolist() for layer in layers],
        )
        return attention, (None if p_gen is None else p_gen.float().tolist())
