"""A translator's calls in batches: fairseq's batching, the generator for the options, the search, the results.

``BatchSession`` holds what every call of a translator shares: the generators built for
each set of options (fairseq's ``SequenceGenerator``, with the vectorised search
``decoding/search.py`` where it applies), the attention-returning views of the models, and
the bounds of a batch. ``batches`` cuts encoded sentences into fairseq's batches (the
task's own dataset for inference and batch iterator, as fairseq-interactive uses them);
``translate_batch`` decodes one, in this process or a decoding worker's.
"""

import copy
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from fairseq import utils

from ..decoding.search import BeamSearch
from ..deployment.int8 import Int8Weight
from .attention import layer_attention, readable
from .loading import LoadedModels, without_host_notices
from .options import GenerationOptions, TranslationOptions
from .results import Hypothesis, LayerAttention, Translation
from .text_codec import CheckedSentence, TextCodec, nothing_to_translate, passed_through, source_tokens
from .workers import DecodingWorkers, check_workers

LN2 = math.log(2)
DEFAULT_MAX_TOKENS = 4000  # source tokens in one of fairseq's batches when the options give no bound


@dataclass(frozen=True)
class BatchCall:
    """What every batch of one ``translate`` call shares: its options as the edge built them
    (without the caller's own functions, ``progress`` and ``still_wanted``, which stay in
    the calling process) and the unknown-word dictionary they name, read once."""

    options: TranslationOptions
    unk_dictionary: Optional[Dict[str, str]]


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


class BatchSession:
    """The batching, generators and decoding of a translator's calls (``search``:
    "vectorised" or "fairseq", as ``Translator``'s)."""

    def __init__(self, loaded: LoadedModels, codec: TextCodec, cfg, search: str):
        self.loaded, self.codec, self.cfg, self.search = loaded, codec, cfg, search
        # the bound of one of fairseq's batches (--max-tokens, --batch-size), unless a call gives its own
        self.batch_tokens = cfg.dataset.max_tokens
        self.batch_sentences = cfg.dataset.batch_size
        self.default_batches = self.batch_tokens is None and self.batch_sentences is None
        if self.default_batches:
            self.batch_tokens = DEFAULT_MAX_TOKENS
        self._generators: "OrderedDict[tuple, object]" = OrderedDict()
        self._attending_models: Optional[list] = None
        self._decoding_workers: Dict[int, DecodingWorkers] = {}
        self._lock = threading.Lock()

    @property
    def source_limit(self) -> int:
        """How many source tokens (with </s>) the model reads."""
        limit = self.loaded.max_positions
        return int(limit[0] if isinstance(limit, (tuple, list)) else limit)

    def adopt_in_worker(self) -> None:
        """In a decoding process forked from this one (``workers.py``): no workers of its own,
        and a lock no other thread of the parent can be holding."""
        self._lock = threading.Lock()
        self._decoding_workers = {}

    def batches(self, encoded: Sequence[str], max_tokens: Optional[int], max_sentences: Optional[int],
                workers: int = 1):
        """(input indices, src_tokens, src_lengths) of fairseq's batches: the task's own
        dataset for inference and batch iterator, as fairseq-interactive uses them. Where
        neither the call nor the options bound a batch, ``workers`` share the default
        bound (the same tokens in flight as one process, in more batches to share out),
        never below what one sentence may have."""
        task = self.loaded.task
        if max_tokens is None and max_sentences is None:
            max_tokens, max_sentences = self.batch_tokens, self.batch_sentences
            if self.default_batches and workers > 1:
                max_tokens = max(DEFAULT_MAX_TOKENS // workers, min(self.source_limit, DEFAULT_MAX_TOKENS))
        tokens, lengths = source_tokens(task, encoded)
        with without_host_notices():  # the batches hold this call's sentences only
            batches = list(task.get_batch_iterator(
                dataset=task.build_dataset_for_inference(tokens, lengths),
                max_tokens=max_tokens, max_sentences=max_sentences, max_positions=self.loaded.max_positions,
                ignore_invalid_inputs=False, disable_iterator_cache=True,
            ).next_epoch_itr(shuffle=False))
        for batch in batches:
            yield batch["id"].tolist(), batch["net_input"]["src_tokens"], batch["net_input"]["src_lengths"]

    def generator(self, options: GenerationOptions, attention: bool) -> Tuple[object, list, Optional[BeamSearch]]:
        """fairseq's generator for these options (kept for the next call with the same),
        the models it runs (the attention-returning views when ``attention``) and the
        vectorised search with its settings, or None where fairseq's must run."""
        key = (options, attention)
        with self._lock:
            if key in self._generators:
                self._generators.move_to_end(key)
                return self._generators[key]
            models = self.loaded.models
            if attention:
                if self._attending_models is None:
                    self._attending_models = [model.returning_attention() for model in self.loaded.models]
                models = self._attending_models
            generation = copy.deepcopy(self.cfg.generation)
            for name, value in vars(options).items():
                setattr(generation, name, value)
            generation.replace_unk = None  # done here, on the hypotheses
            generation.print_alignment = None  # likewise: fairseq's would re-run every hypothesis
            generator = self.loaded.task.build_generator(models, generation)
            search = BeamSearch.like(generator, models[0]) if self.search == "vectorised" else None
            entry = (generator, models, search)
            self._generators[key] = entry
            if len(self._generators) > 32:
                self._generators.popitem(last=False)
            return entry

    def translate(self, sentences: Sequence[CheckedSentence], options: TranslationOptions) -> List[Optional[Translation]]:
        """``Translator.translate`` of checked sentences: those without a word pass through,
        the rest are batched and decoded (here or in ``options.workers`` processes)."""
        check_workers(options.workers, self.loaded.device)
        words = [i for i, sentence in enumerate(sentences) if not nothing_to_translate(sentence.text)]
        if len(words) < len(sentences):  # emoji, punctuation, numbers, links: the model would invent a sentence
            return self._passing_through(sentences, words, options)
        call = BatchCall(replace(options, progress=None, still_wanted=None),
                         self.codec.unk_dictionary_for(options.replace_unk))
        batches = self.batches([sentence.encoded for sentence in sentences], options.max_tokens, options.max_sentences,
                               options.workers)
        if options.still_wanted is not None:
            batches = wanted_rows(batches, options.still_wanted, self.loaded.task.source_dictionary.pad())
        jobs = ((call, ids, src_tokens, src_lengths, [sentences[i] for i in ids]) for ids, src_tokens, src_lengths in batches)
        done = ((job, self.translate_batch(*job)) for job in jobs) if options.workers == 1 else \
            self.workers(options.workers).map(jobs)
        results: List[Optional[Translation]] = [None] * len(sentences)
        for job, translations in done:
            ids = job[1]
            for index, translation in zip(ids, translations):
                results[index] = translation
            if options.progress is not None:
                options.progress(len(ids))
        return results

    def _passing_through(self, sentences: Sequence[CheckedSentence], words: List[int], options: TranslationOptions):
        """Lines without a word as they are; the others (``words``) translated."""
        results = [passed_through(sentence.text, self.loaded.task.target_dictionary.eos()) for sentence in sentences]
        if words:
            wanted = options.still_wanted
            translated = self.translate([sentences[i] for i in words], replace(
                options, still_wanted=None if wanted is None else (lambda i: wanted(words[i]))))
            for i, translation in zip(words, translated):
                results[i] = translation
        if options.progress is not None:
            options.progress(len(sentences) - len(words))
        return results

    def workers(self, workers: int) -> DecodingWorkers:
        """The decoding processes for ``workers`` (``workers.py``), started on first use and
        kept until ``close``; one set per count, for calls in other threads with another."""
        with self._lock:
            pool = self._decoding_workers.get(workers)
            if pool is None or pool.broken:
                if pool is not None:
                    pool.close()
                for model in self.loaded.models:  # int8 weights packed here once, shared by the forked workers
                    for module in model.modules():
                        if isinstance(module, Int8Weight):
                            module.packed()
                pool = self._decoding_workers[workers] = DecodingWorkers(self, workers)
            return pool

    def close(self) -> None:
        """Stops the decoding processes, if any were started."""
        with self._lock:
            pools, self._decoding_workers = list(self._decoding_workers.values()), {}
        for pool in pools:
            pool.close()

    def translate_batch(self, call: BatchCall, ids: List[int], src_tokens: torch.Tensor, src_lengths: torch.Tensor,
                        sentences: List[CheckedSentence]) -> List[Translation]:
        """One batch of ``batches`` translated: a Translation per sentence, in ``ids``' order
        (``sentences`` are the batch's own)."""
        options, unk_dictionary = call.options, call.unk_dictionary
        needs_attention = options.alignment or unk_dictionary is not None
        generator, models, search = self.generator(options.generation, needs_attention)
        task, device = self.loaded.task, self.loaded.device
        tgt_dict = task.target_dictionary
        strip = getattr(generator, "symbols_to_strip_from_output", {generator.eos})
        on_device = src_tokens.to(device), src_lengths.to(device)
        if search is not None:
            batch_hypos = search.generate(*on_device, attention=needs_attention)
        else:
            sample = {"net_input": {"src_tokens": on_device[0], "src_lengths": on_device[1]}}
            batch_hypos = task.inference_step(generator, models, sample)
        translations = []
        for row, hypos in enumerate(batch_hypos[: len(ids)]):
            source_row = src_tokens[row]
            translation = Translation(sentences[row].text)
            for hypo in hypos[: options.generation.nbest]:
                tokens = hypo["tokens"].int().cpu()
                token_ids = tokens.tolist()  # the dictionary reads ints ~30x faster than 0-d tensors
                text = self.codec.hypothesis_text(token_ids, strip, unk_dictionary, hypo["attention"], source_row,
                                                  sentences[row].encoded)
                result = Hypothesis(
                    text=self.codec.decode(text) if options.decode else text,
                    tokens=token_ids,
                    score=float(hypo["score"]) / LN2,
                    positional_scores=(hypo["positional_scores"].double() / LN2).tolist(),
                )
                if options.alignment:
                    pairs = utils.extract_hard_alignment(hypo["attention"].float().cpu().transpose(1, 0), source_row,
                                                         tokens, tgt_dict.pad(), tgt_dict.eos())
                    result.alignment = [(int(s), int(t)) for s, t in pairs]
                if options.attention:
                    result.attention, result.p_gen = self.teacher_forced(
                        utils.strip_pad(source_row, task.source_dictionary.pad()), tokens)
                translation.hypotheses.append(result)
            translations.append(translation)
        return translations

    def teacher_forced(self, src_tokens: torch.Tensor, target_tokens: torch.Tensor):
        """Each attention layer's weights (and p_gen) for one sentence and its translation."""
        model, device = self.loaded.models[0], self.loaded.device
        layers, p_gen = layer_attention(model, src_tokens.to(device), target_tokens.long().to(device))
        src_dict, tgt_dict = self.loaded.task.source_dictionary, self.loaded.task.target_dictionary
        attention = LayerAttention(
            source=readable([src_dict[i] for i in src_tokens.tolist()]),
            target=readable([tgt_dict[i] for i in target_tokens.tolist()]),
            layers=[layer.float().tolist() for layer in layers],
        )
        return attention, (None if p_gen is None else p_gen.float().tolist())
