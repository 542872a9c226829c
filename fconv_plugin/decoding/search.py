"""Beam search with tensors throughout: fairseq's SequenceGenerator, its hypotheses, less of its overhead.

The paper translates with beam search (§4.3: beam 5, log-likelihoods normalised by length).
fairseq's ``SequenceGenerator`` is the reference: for the options the inference core
passes (beam, lenpen, unkpen, min/max length, no-repeat n-grams, prefixes, nbest) this
search takes the same steps and returns the same hypotheses, scores and positional
scores, in fairseq's output format. What differs is the bookkeeping around the model:

- finished hypotheses are written into per-sentence tensors (a slot per beam entry),
  not appended one by one in a Python loop;
- for the plugin's own decoder the state is plain tensors (``decoding/steps.py``):
  the newest tokens in, each layer a function looked up once per call, the same bits as
  the decoder's forward; any other incremental decoder keeps fairseq's protocol, its
  reordering sent straight to the modules that keep decoding state, found once per call,
  instead of walking every module at every step;
- a step has no temperature division, profiler ranges or per-step asserts; the NaN
  guard is one pass over the vocabulary in place;
- repeated n-grams are blocked by one comparison over every hypothesis' n-gram windows;
- where the package was installed with torch, a step's rules (no NaN, never pad, the unk
  penalty, no </s> before ``min_len``) and its choice of the 2 x beam best candidates of
  every sentence run in one compiled pass over the vocabulary (``beam_candidates.cpp``)
  instead of five passes of torch operations; steps that force a prefix token, and the
  last step, keep the torch operations, which are also the stand-in where it is not built;
- there too, the bookkeeping between steps is one compiled call (``Bookkeeping``) instead
  of some 40 small torch operations: the candidates split into finished hypotheses and the
  beam's next rows (fairseq's eos_mask, active_mask and top-k), the finished ones written
  into their sentence's slots, finished sentences leaving, the live rows extended; searches
  that keep the attention or force prefixes keep the torch form (``_Bookkeeping``), the
  reference it is tested against;
- with the plugin's compiled decoder step, a search that blocks no n-grams runs whole
  steps in that compiled loop (``Bookkeeping.run_steps``: reorder, step, candidates,
  books; it drives the compiled decoding through the table ``decoder_step`` hands out,
  C++ to C++, without the GIL), back in Python only when a sentence leaves and for the
  last step.

Repeated n-grams are blocked as ``compat.ngram_blocking`` mends fairseq's CPU blocker
to (fairseq issues #4709, #5206: unmended it reads the buffer's padding and never
blocks), which is what fairseq's CUDA kernel does.

fairseq-generate and fairseq-interactive keep fairseq's generator; the inference core
(``Translator``) uses this one for plain beam search with one model and fairseq's for
anything else (sampling, diverse beams, constraints, ensembles, temperature).
"""

import math
from typing import Dict, List, Optional

import torch
from torch import Tensor

from .. import backend
from ..errors import FConvError
from .rules import SearchRules
from .steps import DecoderSteps

NEG_INF = float("-inf")


class BeamSearch:
    """Beam search over one encoder-decoder model with an incremental decoder.

    The parameters are SequenceGenerator's, named as fairseq names them: ``beam_size``,
    ``max_len_a`` / ``max_len_b`` (the output may have a·source_len + b tokens, at most
    ``max_len`` or the decoder's positions less one), ``min_len``, ``normalize_scores``
    and ``len_penalty`` (a finished hypothesis' score is its sum divided by
    length^lenpen), ``unk_penalty`` (subtracted from <unk>'s log-probability) and
    ``no_repeat_ngram_size``.
    """

    def __init__(self, model, tgt_dict, beam_size: int = 5, max_len_a: float = 0.0, max_len_b: int = 200,
                 max_len: int = 0, min_len: int = 1, normalize_scores: bool = True, len_penalty: float = 1.0,
                 unk_penalty: float = 0.0, no_repeat_ngram_size: int = 0, one_pass: bool = True,
                 explicit_state: bool = True):
        self.model = model
        self.pad, self.unk, self.eos = tgt_dict.pad(), tgt_dict.unk(), tgt_dict.eos()
        self.vocab_size = len(tgt_dict)
        self.beam = min(beam_size, self.vocab_size - 1)  # pad is never chosen
        self.max_len_a, self.max_len_b = max_len_a, max_len_b
        self.max_len = max_len or model.max_decoder_positions()
        self.min_len = min_len
        self.normalize_scores = normalize_scores
        self.len_penalty = len_penalty
        self.unk_penalty = unk_penalty
        self.no_repeat_ngram_size = no_repeat_ngram_size
        self.rules = SearchRules(self.eos, self.pad, self.unk, self.beam, max_len_a, max_len_b, self.max_len, min_len,
                                 normalize_scores, len_penalty, unk_penalty, no_repeat_ngram_size)
        # the compiled candidate selection and bookkeeping where the search's backend names them; False: torch
        self.one_pass = one_pass
        # the plugin's decoder with its state in plain tensors; any other (or False) through fairseq's protocol
        explicit = explicit_state and DecoderSteps.supports(model)
        self.steps = DecoderSteps(model) if explicit else FairseqIncrementalSteps(model)

    @classmethod
    def like(cls, generator, model, one_pass: bool = True, explicit_state: bool = True) -> Optional["BeamSearch"]:
        """This search with a fairseq ``SequenceGenerator``'s settings, or None when that
        generator does more than plain beam search with one model (sampling, diverse beams,
        constraints, an ensemble, a language model, temperature, suppressed tokens).
        ``one_pass`` and ``explicit_state`` as the constructor's."""
        from fairseq import search
        from fairseq.models import FairseqIncrementalDecoder
        from fairseq.sequence_generator import SequenceGenerator

        plain = (
            type(generator) is SequenceGenerator
            and type(generator.search) is search.BeamSearch
            and generator.model.models_size == 1
            and generator.lm_model is None
            and generator.temperature == 1.0
            and not generator.match_source_len
            and generator.token_indices_to_suppress is None
            and isinstance(getattr(model, "decoder", None), FairseqIncrementalDecoder)
        )
        if not plain:
            return None
        blocker = generator.repeat_ngram_blocker
        return cls(
            model, generator.tgt_dict, beam_size=generator.beam_size, max_len_a=generator.max_len_a,
            max_len_b=generator.max_len_b, max_len=generator.max_len, min_len=generator.min_len,
            normalize_scores=generator.normalize_scores, len_penalty=generator.len_penalty,
            unk_penalty=generator.unk_penalty,
            no_repeat_ngram_size=0 if blocker is None else blocker.no_repeat_ngram_size, one_pass=one_pass,
            explicit_state=explicit_state,
        )

    @torch.no_grad()
    def generate(self, src_tokens: Tensor, src_lengths: Tensor, prefix_tokens: Optional[Tensor] = None,
                 attention: bool = False) -> List[List[Dict[str, Tensor]]]:
        """Every sentence's finished hypotheses, best first, as fairseq's generator returns
        them: ``tokens`` (ending in </s>), ``score``, ``positional_scores``, ``attention``
        (source x target, averaged over layers, when ``attention``; else empty) and
        ``alignment`` (empty). ``prefix_tokens`` (sentences x n, padded) forces the
        first tokens of every hypothesis, as ``--prefix-size`` does. The backend is selected
        once, here, and each step taken by one of three strategies: whole steps compiled,
        a step with the compiled candidates, or a step in torch operations."""
        bsz, src_len = src_tokens.shape
        max_len = self.rules.max_length(src_len)
        if self.min_len > max_len:
            raise FConvError(f"min_len {self.min_len} is longer than the longest output allowed ({max_len}); "
                             "lower --min-len or raise --max-len-a/--max-len-b")
        if hasattr(self.model, "set_beam_size") and self.beam > 1:  # attention keys held once per sentence
            self.model.set_beam_size(self.beam)
        encoder_out = self.model.encoder(src_tokens=src_tokens, src_lengths=src_lengths)
        encoder_out = self.model.encoder.reorder_encoder_out(encoder_out, _repeat_rows(bsz, self.beam, src_tokens.device))
        chosen = self.steps.backend_for(encoder_out)  # the one selection: the step's and the candidates'
        candidates = chosen.candidates if self.one_pass else None  # beam_candidates (float32 scores), where it runs
        bookkeeping = self._bookkeeping(bsz, max_len, src_len, attention, prefix_tokens is not None, src_tokens.device,
                                 candidates)
        search = _Search(bookkeeping, self.steps.start(encoder_out, chosen), prefix_tokens, max_len, attention)
        compiled_steps = self._compiled_steps(bookkeeping, search.decoding_state, attention)
        finished = False
        while not finished:  # max_len + 1 steps at most: one more for </s>
            search.reorder_by(self.steps)
            if compiled_steps is not None and search.step < max_len:
                finished = self._compiled_whole_steps(search, compiled_steps, chosen.step.api)
            elif candidates is not None and not search.forcing_prefix() and search.step < max_len:
                finished = self._step_with_compiled_candidates(search)
            else:
                finished = self._step_in_torch_operations(search)
        return best_first(*bookkeeping.finished())

    def _compiled_whole_steps(self, search: "_Search", compiled_steps, step_api) -> bool:
        """Steps in the compiled loop (``Bookkeeping.run_steps``: reorder, step, candidates,
        bookkeeping), until a sentence leaves, the search ends or the last step comes."""
        finished, search.step, search.reorder, search.kept_sentences = search.bookkeeping.run_steps(
            compiled_steps, step_api, search.step, self.vocab_size, self.model.decoder.padding_idx, self.pad,
            self.unk, self.unk_penalty, self.min_len)
        return finished

    def _step_with_compiled_candidates(self, search: "_Search") -> bool:
        """One step whose rules and 2 x beam best candidates are one compiled pass over the
        vocabulary (``best_candidates``); the books kept by the search's bookkeeping."""
        step, bookkeeping = search.step, search.bookkeeping
        lprobs = self._log_probs(search)
        if self.no_repeat_ngram_size > 0:  # -inf stays -inf under every rule: blocking first is the same
            block_repeated_ngrams(bookkeeping.tokens(step), lprobs, self.no_repeat_ngram_size)
        return search.step_done(*bookkeeping.advance_with_best_candidates(
            step, lprobs, self._candidate_count(step), self.pad, self.unk, self.unk_penalty, step < self.min_len))

    def _step_in_torch_operations(self, search: "_Search") -> bool:
        """One step in torch operations, fairseq's (the reference): the rules, forced
        prefixes and the last step's </s> (``_constrain``), then the best candidates."""
        step, bookkeeping = search.step, search.bookkeeping
        lprobs = self._log_probs(search)
        forcing_prefix = search.forcing_prefix()
        self._constrain(lprobs, step, search.max_len, bookkeeping.beams if forcing_prefix else None, search.prefix_tokens)
        if self.no_repeat_ngram_size > 0:
            block_repeated_ngrams(bookkeeping.tokens(step), lprobs, self.no_repeat_ngram_size)
        cand_scores, cand_indices, cand_beams = self._best_candidates(
            step, lprobs, bookkeeping.scores(step - 1) if step > 0 else None)
        return search.step_done(*bookkeeping.advance(step, cand_scores, cand_beams, cand_indices))

    def _log_probs(self, search: "_Search") -> Tensor:
        """log p(y_{i+1} | y_1..y_i, x) for every hypothesis, the step's attention recorded when kept."""
        lprobs, step_attention = self.steps.log_probs(search.decoding_state, search.bookkeeping.tokens(search.step),
                                                      search.attention)
        if search.attention and step_attention is not None:
            search.bookkeeping.record_attention(search.step, step_attention)
        return lprobs

    def _compiled_steps(self, bookkeeping, decoding_state, attention: bool):
        """The decoder's compiled decoding where the compiled bookkeeping can run whole steps
        with it (``Bookkeeping.run_steps``): no attention kept, no n-grams blocked; else None."""
        if attention or self.no_repeat_ngram_size > 0 or isinstance(bookkeeping, _Bookkeeping):
            return None
        return self.steps.compiled_decoding(decoding_state)

    def _bookkeeping(self, bsz: int, max_len: int, src_len: int, attention: bool, prefixes: bool, device,
                     candidates=None):
        """The hypotheses' bookkeeping between steps: compiled (``candidates``, the search's
        ``beam_candidates`` module) for searches without attention weights or prefixes; else in
        torch operations, with ``candidates``' passes where it is given."""
        if candidates is not None and not attention and not prefixes:
            return candidates.Bookkeeping(bsz, self.beam, max_len, self.eos, self.pad, self.normalize_scores,
                                          self.len_penalty)
        return _Bookkeeping(self, bsz, max_len, src_len if attention else 0, device, candidates)

    def _constrain(self, lprobs: Tensor, step: int, max_len: int, beams: Optional["_Beams"],
                   prefix_tokens: Optional[Tensor]):
        """fairseq's rules, in its order: no NaN, never pad, the unk penalty, only </s> at
        the last step, the prefix's tokens or else no </s> before ``min_len``."""
        torch.nan_to_num_(lprobs, nan=NEG_INF, posinf=math.inf, neginf=NEG_INF)
        lprobs[:, self.pad] = NEG_INF
        lprobs[:, self.unk] -= self.unk_penalty
        if step >= max_len:
            lprobs[:, : self.eos] = NEG_INF
            lprobs[:, self.eos + 1:] = NEG_INF
        if prefix_tokens is not None and step < prefix_tokens.size(1) and step < max_len:
            self._force_prefix(step, lprobs, beams, prefix_tokens)
        elif step < self.min_len:
            lprobs[:, self.eos] = NEG_INF

    def _force_prefix(self, step: int, lprobs: Tensor, beams: "_Beams", prefix_tokens: Tensor) -> None:
        """Rows whose prefix has a token at ``step`` may only take that token, at its own
        log-probability; a prefix ending in </s> makes every hypothesis its first one."""
        forced = prefix_tokens[:, step].repeat_interleave(self.beam)
        rows = forced.ne(self.pad)
        forced_lprobs = lprobs.gather(1, forced.unsqueeze(1))
        lprobs[rows] = NEG_INF
        lprobs[rows] = lprobs[rows].scatter(1, forced[rows].unsqueeze(1), forced_lprobs[rows])
        ends = forced.eq(self.eos).view(-1, self.beam)[:, 0]
        if bool(ends.any()):
            for tensor in (beams.tokens, beams.scores, lprobs):
                by_sentence = tensor.view(-1, self.beam, tensor.size(-1))
                by_sentence[ends] = by_sentence[ends][:, :1, :]

    def _best_candidates(self, step: int, lprobs: Tensor, previous_scores: Optional[Tensor]):
        """The 2·beam best (score, token, beam) extensions of every sentence (fairseq's
        BeamSearch.step), ``previous_scores`` the hypotheses' cumulative scores (None at step 0)."""
        beam = self.beam
        live = lprobs.size(0) // beam
        by_sentence = lprobs.view(live, beam, self.vocab_size)
        if step == 0:  # every hypothesis is the same </s>: extend the first only
            by_sentence = by_sentence[:, :1, :]
        else:
            by_sentence = by_sentence + previous_scores.view(live, beam, 1)
        flat = by_sentence.reshape(live, -1)
        cand_scores, flat_indices = torch.topk(flat, k=self._candidate_count(step))
        cand_beams = torch.div(flat_indices, self.vocab_size, rounding_mode="trunc")
        return cand_scores, flat_indices.fmod(self.vocab_size), cand_beams

    def split_candidates_in_torch_operations(self, cand_scores: Tensor, cand_beams: Tensor, cand_indices: Tensor,
                                             ignored: Tensor):
        """The candidates (sentences x k, best first) split as fairseq's SequenceGenerator
        splits them (its eos_mask, active_mask and top-k): which of the first beam end in
        </s> (finished hypotheses; not those that were fillers, ``ignored``), and what the
        beam continues with: the first beam that do not end so, then ending ones as fillers
        if fewer are left, as rows (sentence · beam + beam index), tokens, scores and which
        are fillers. The reference of beam_candidates.cpp's ``split_candidates``."""
        beam, cand_size = self.beam, 2 * self.beam
        live, width = cand_scores.shape
        eos_mask = cand_indices.eq(self.eos) & cand_scores.ne(NEG_INF)
        eos_mask[:, :beam][ignored] = False
        ending = eos_mask[:, :beam].clone()
        eos_mask[:, :beam] = ignored | eos_mask[:, :beam]
        active_mask = eos_mask.to(torch.long) * cand_size + torch.arange(width, device=eos_mask.device)
        ranks, chosen = torch.topk(active_mask, k=beam, dim=1, largest=False)
        rows = torch.gather(cand_beams, 1, chosen) + (torch.arange(live, device=chosen.device) * beam).unsqueeze(1)
        return (ending, rows, torch.gather(cand_indices, 1, chosen), torch.gather(cand_scores, 1, chosen),
                ranks.ge(cand_size))

    def _candidate_count(self, step: int) -> int:
        """Twice the beam, in case half end in </s>; fewer if a sentence has fewer extensions (``rules``)."""
        return self.rules.candidate_count(step, self.vocab_size)

    def _length_normalizer(self, step: int) -> Optional[float]:
        """The divisor of a hypothesis finished at ``step`` (step + 1 tokens with </s>; ``rules``)."""
        return self.rules.length_divisor(step)


class _Search:
    """One search's moving parts between its steps: the bookkeeping, the decoder's state, the step,
    the reordering the last step asked for, and the prefixes still to force."""

    def __init__(self, bookkeeping, decoding_state, prefix_tokens: Optional[Tensor], max_len: int, attention: bool):
        self.bookkeeping, self.decoding_state, self.prefix_tokens = bookkeeping, decoding_state, prefix_tokens
        self.max_len, self.attention = max_len, attention
        self.step = 0
        self.reorder: Optional[Tensor] = None
        self.kept_sentences: Optional[Tensor] = None  # the sentences left after the last step, where some finished

    def forcing_prefix(self) -> bool:
        return self.prefix_tokens is not None and self.step < self.prefix_tokens.size(1)

    def reorder_by(self, steps) -> None:
        """The decoder's state in the rows the last step continues (they only move within a sentence)."""
        if self.reorder is not None:
            self.decoding_state = steps.reorder_within_sentences(self.decoding_state, self.reorder, self.kept_sentences)
            self.reorder = self.kept_sentences = None

    def step_done(self, finished: bool, reorder: Optional[Tensor], kept_sentences: Optional[Tensor]) -> bool:
        """A step's outcome: finished, or on to the next step with its reordering."""
        if finished:
            return True
        if self.step >= self.max_len:
            raise AssertionError(f"beam search reached step {self.step} of {self.max_len} with unfinished sentences")
        self.reorder, self.kept_sentences = reorder, kept_sentences
        if kept_sentences is not None and self.prefix_tokens is not None:
            self.prefix_tokens = self.prefix_tokens[kept_sentences]
        self.step += 1
        return False


class FairseqIncrementalSteps:
    """Any fairseq incremental decoder through fairseq's protocol, with ``DecoderSteps``'
    interface: the whole prefix in at every step, the state (the encoder output and the
    incremental-state dictionary) reordered by the modules that keep it, found once."""

    def __init__(self, model):
        self.model = model
        # the modules that keep decoding state, in the order fairseq reorders them
        self._reorderers = [m for m in model.decoder.modules() if hasattr(m, "reorder_incremental_state")]

    def backend_for(self, encoder_out) -> "backend.Backend":
        """The search's forms: the compiled candidates where they run; fairseq's decoder steps in torch."""
        return backend.select(next(self.model.parameters()).device, torch.float32)  # any encoder's output format

    def start(self, encoder_out, chosen=None) -> list:
        incremental_state: Dict[str, Dict[str, Optional[Tensor]]] = {}
        return [encoder_out, incremental_state]

    def log_probs(self, state: list, tokens: Tensor, attention: bool):
        encoder_out, incremental_state = state
        logits, step_attention = self.model.decoder(tokens, encoder_out=encoder_out, incremental_state=incremental_state)
        lprobs = self.model.get_normalized_probs((logits[:, -1:, :], None), log_probs=True)[:, -1, :]
        return lprobs, (step_attention[:, -1, :] if attention and step_attention is not None else None)

    def reorder(self, state: list, order: Tensor) -> list:
        encoder_out, incremental_state = state
        for module in self._reorderers:
            reordered = module.reorder_incremental_state(incremental_state, order)
            incremental_state = incremental_state if reordered is None else reordered
        return [self.model.encoder.reorder_encoder_out(encoder_out, order), incremental_state]

    def reorder_within_sentences(self, state: list, order: Tensor, kept_sentences: Optional[Tensor]) -> list:
        """``reorder``: fairseq's protocol has no shorter way for beam search's orders."""
        return self.reorder(state, order)

    @staticmethod
    def compiled_decoding(state: list) -> None:
        """None: fairseq's protocol has no compiled decoding."""
        return None


class _Bookkeeping:
    """Finished hypotheses and live beams between steps, in torch operations: every search
    where the compiled ``Bookkeeping`` (``beam_candidates.cpp``) does not run (attention
    weights, prefixes, a GPU, not built), and the reference it is tested against."""

    def __init__(self, search: BeamSearch, bsz: int, max_len: int, src_len: int, device, candidates=None):
        self.search, self.beam, self.max_len = search, search.beam, max_len
        self.candidates = candidates  # beam_candidates' passes, or None: torch operations
        self.beams = _Beams(bsz, search.beam, max_len, search.eos, search.pad, device)
        self.hypotheses = _Hypotheses(bsz, search.beam, max_len, src_len, search.eos, device)
        self.sentences = torch.arange(bsz, device=device)  # original index of each live sentence
        self.cands_to_ignore = torch.zeros(bsz, search.beam, dtype=torch.bool, device=device)

    def tokens(self, step: int) -> Tensor:
        return self.beams.tokens[:, : step + 1]

    def scores(self, step: int) -> Tensor:
        return self.beams.scores[:, step]

    def record_attention(self, step: int, step_attention: Tensor) -> None:
        self.beams.record_attention(step, step_attention)

    def advance(self, step: int, cand_scores: Tensor, cand_beams: Tensor, cand_indices: Tensor):
        """The step's candidates (sentences x k, best first) taken: whether every sentence is
        finished, else the old rows the new ones continue and the sentences kept (indices
        among the live ones) where some finished, else None."""
        beam, beams, sentences = self.beam, self.beams, self.sentences
        live = cand_scores.size(0)
        ending, rows, tokens, scores, fillers = self._split(cand_scores, cand_beams, cand_indices, self.cands_to_ignore)

        # hypotheses ending in </s> among the best beam candidates are finished, scored by length (§4.3)
        finished_now: Optional[Tensor] = None
        if bool(ending.any()):
            ending_rows = cand_beams[:, :beam] + (torch.arange(live, device=cand_beams.device) * beam).unsqueeze(1)
            self.hypotheses.add(step, ending, ending_rows, cand_scores[:, :beam], beams, sentences,
                                self.search._length_normalizer(step))
            finished_now = ending.any(dim=1) & (self.hypotheses.count[sentences].eq(beam) | (step == self.max_len))
            if bool(finished_now.all()):
                return True, None, None

        # the beam continues with the best candidates that do not end in </s>
        reorder = rows.view(-1)  # rows of the decoder's state: this step's batch
        kept_sentences = None
        if finished_now is not None and bool(finished_now.any()):  # finished sentences leave the batch
            kept_sentences = (~finished_now).nonzero().squeeze(1)
            rows, tokens, scores, fillers = (t[kept_sentences] for t in (rows, tokens, scores, fillers))
            reorder = rows.view(-1)
            rows = rows - ((kept_sentences - torch.arange(kept_sentences.numel(), device=rows.device))
                           * beam).unsqueeze(1)
            beams.keep_sentences(kept_sentences)
            self.sentences = sentences[kept_sentences]
        self.cands_to_ignore = fillers
        beams.advance(step, rows.view(-1), tokens, scores)
        return False, reorder, kept_sentences

    def _split(self, cand_scores: Tensor, cand_beams: Tensor, cand_indices: Tensor, ignored: Tensor):
        """The candidates split as fairseq splits them: one compiled pass where the search runs
        ``beam_candidates``, else its torch operations (``split_candidates_in_torch_operations``)."""
        if self.candidates is None:
            return self.search.split_candidates_in_torch_operations(cand_scores, cand_beams, cand_indices, ignored)
        return self.candidates.split_candidates(cand_scores, cand_beams, cand_indices, ignored, self.search.eos, self.beam)

    def advance_with_best_candidates(self, step: int, lprobs: Tensor, k: int, pad: int, unk: int,
                                     unk_penalty: float, forbid_eos: bool):
        """``advance`` with the compiled pass's k best candidates (``best_candidates``), where
        the search runs it (as the compiled ``Bookkeeping``'s method of that name)."""
        candidates = self.candidates.best_candidates(lprobs, self.scores(step - 1) if step > 0 else None, self.beam, k,
                                                     pad, unk, unk_penalty, self.search.eos, forbid_eos)
        return self.advance(step, *candidates)

    def finished(self):
        """As the compiled ``Bookkeeping.finished``, and the attention where it is kept."""
        h = self.hypotheses
        return h.count, h.tokens, h.positional_scores, h.lengths, h.scores, h.attention


class _Beams:
    """The live hypotheses: tokens (rows x max_len + 2, starting with </s>), cumulative
    scores per position, and the attention per step when asked for."""

    def __init__(self, bsz: int, beam: int, max_len: int, eos: int, pad: int, device):
        self.beam = beam
        self.tokens = torch.full((bsz * beam, max_len + 2), pad, dtype=torch.long, device=device)
        self.tokens[:, 0] = eos
        self.scores = torch.zeros(bsz * beam, max_len + 1, device=device)
        self.attention: Optional[Tensor] = None
        self.max_len = max_len

    def record_attention(self, step: int, step_attention: Tensor) -> None:
        if self.attention is None:  # float32 like the scores, whatever the model's precision (as fairseq keeps it)
            self.attention = self.scores.new_empty(self.tokens.size(0), step_attention.size(1), self.max_len + 2)
        self.attention[:, :, step + 1].copy_(step_attention)

    def keep_sentences(self, kept: Tensor) -> None:
        """Only the sentences ``kept`` (indices among the live ones) stay."""
        beam = self.beam

        def rows(tensor: Tensor) -> Tensor:
            return tensor.view(-1, beam, *tensor.shape[1:])[kept].view(kept.numel() * beam, *tensor.shape[1:])

        self.tokens, self.scores = rows(self.tokens), rows(self.scores)
        if self.attention is not None:
            self.attention = rows(self.attention)

    def advance(self, step: int, rows: Tensor, next_tokens: Tensor, next_scores: Tensor) -> None:
        """Row r continues hypothesis ``rows[r]`` with a token and its cumulative score."""
        beam = self.beam
        self.tokens[:, : step + 1] = self.tokens[:, : step + 1].index_select(0, rows)
        self.tokens.view(-1, beam, self.tokens.size(1))[:, :, step + 1] = next_tokens
        if step > 0:
            self.scores[:, :step] = self.scores[:, :step].index_select(0, rows)
        self.scores.view(-1, beam, self.scores.size(1))[:, :, step] = next_scores
        if self.attention is not None:
            self.attention[:, :, : step + 2] = self.attention[:, :, : step + 2].index_select(0, rows)


class _Hypotheses:
    """Finished hypotheses, ``beam`` slots per sentence, filled in the order fairseq appends them."""

    def __init__(self, bsz: int, beam: int, max_len: int, src_len: int, eos: int, device):
        self.beam, self.eos = beam, eos
        self.count = torch.zeros(bsz, dtype=torch.long, device=device)
        self.tokens = torch.zeros(bsz, beam, max_len + 1, dtype=torch.long, device=device)
        self.positional_scores = torch.zeros(bsz, beam, max_len + 1, device=device)
        self.lengths = torch.zeros(bsz, beam, dtype=torch.long, device=device)
        self.scores = torch.full((bsz, beam), NEG_INF, device=device)
        self.attention = torch.zeros(bsz, beam, src_len, max_len + 1, device=device) if src_len else None

    def add(self, step: int, ending: Tensor, rows: Tensor, cumulative: Tensor, beams: _Beams, sentences: Tensor,
            normalizer: Optional[float]) -> None:
        """The candidates ``ending`` (live sentences x beam) end with </s> at ``step``: each
        takes its sentence's next free slot, in candidate order, while slots are left."""
        live_index, candidate = ending.nonzero(as_tuple=True)
        sentence = sentences[live_index]
        slot = self.count[sentence] + (ending.cumsum(dim=1) - 1)[live_index, candidate]
        fits = slot.lt(self.beam)
        live_index, candidate, sentence, slot = live_index[fits], candidate[fits], sentence[fits], slot[fits]
        row = rows[live_index, candidate]
        final_score = cumulative[live_index, candidate]

        tokens = beams.tokens.index_select(0, row)[:, 1: step + 2]
        tokens[:, step] = self.eos
        cumulative_by_position = beams.scores.index_select(0, row)[:, : step + 1]
        cumulative_by_position[:, step] = final_score
        positional = cumulative_by_position.clone()
        positional[:, 1:] = cumulative_by_position[:, 1:] - cumulative_by_position[:, :-1]
        if normalizer is not None:
            final_score = final_score / normalizer

        self.tokens[sentence, slot, : step + 1] = tokens
        self.positional_scores[sentence, slot, : step + 1] = positional
        self.lengths[sentence, slot] = step + 1
        self.scores[sentence, slot] = final_score
        if self.attention is not None and beams.attention is not None:
            self.attention[sentence, slot, :, : step + 1] = beams.attention.index_select(0, row)[:, :, 1: step + 2]
        self.count.index_add_(0, sentence, torch.ones_like(sentence))


def best_first(count: Tensor, tokens: Tensor, positional_scores: Tensor, lengths: Tensor, scores: Tensor,
               attention: Optional[Tensor] = None) -> List[List[Dict[str, Tensor]]]:
    """fairseq's output from the finished hypotheses' slots: per sentence, its hypotheses
    sorted by score, best first."""
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    results = []
    empty = torch.empty(0)
    for sentence in range(scores.size(0)):
        found = []
        for slot in order[sentence, : int(count[sentence])].tolist():
            length = int(lengths[sentence, slot])
            found.append({
                "tokens": tokens[sentence, slot, :length],
                "score": scores[sentence, slot],
                "attention": empty if attention is None else attention[sentence, slot, :, :length],
                "alignment": empty,
                "positional_scores": positional_scores[sentence, slot, :length],
            })
        results.append(found)
    return results


def block_repeated_ngrams(tokens: Tensor, lprobs: Tensor, n: int) -> None:
    """Forbid every token that would repeat an n-gram already in its hypothesis.

    ``tokens``: rows x (step + 1), starting with the </s> that opens every hypothesis.
    For each earlier position whose n - 1 tokens equal the hypothesis' last n - 1, the
    token that followed them there gets -inf (for n = 1: every token already produced).
    """
    if n == 1:
        produced = tokens[:, 1:]
        if produced.numel():
            lprobs.scatter_(1, produced, NEG_INF)
        return
    length = tokens.size(1)
    earlier = length - (n - 1)  # positions where an earlier (n-1)-gram starts
    if earlier <= 0:
        return
    last = tokens[:, length - (n - 1):]
    windows = tokens[:, : length - 1].unfold(1, n - 1, 1)  # rows x earlier x (n - 1)
    repeats = windows.eq(last.unsqueeze(1)).all(dim=2)
    rows, starts = repeats.nonzero(as_tuple=True)
    if rows.numel():
        lprobs[rows, tokens[rows, starts + n - 1]] = NEG_INF


def _repeat_rows(bsz: int, beam: int, device) -> Tensor:
    """0 0 .. 1 1 ..: each sentence's row once per hypothesis."""
    return torch.arange(bsz, device=device).repeat_interleave(beam)
