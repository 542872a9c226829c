"""Dynamic batching with back-pressure: sentences of requests that arrive together go
through one generation call, and a full queue says so at once.

A request becomes a ``Job`` (its checked sentences, its one ``TranslationOptions`` value and
its deadline), cut into chunks
that each fit one generation call (``max_tokens`` source tokens, ``max_sentences``).
One worker thread owns the models. It waits for the first chunk, then up to ``window``
seconds for more work, and takes a round: one chunk of every waiting job in arrival
order, again and again while the budget lasts. So a large request is spread over
several rounds, and each round serves first the jobs it served longest ago (round
robin, new jobs first): a small request that arrives meanwhile goes into the next round, so its wait is
bounded by one generation call, not by the large request.

Back-pressure: at most ``max_queued_sentences`` sentences wait or run; a request that
would go past that is refused on ``submit`` (``QueueFull``, with a wait to suggest),
never queued to time out. A job whose deadline has passed, or whose client gave up,
expires: it leaves the queue before its next chunk, and the round it is in at the
round's next generation batch (``Translator.translate``'s ``still_wanted``; a batch
already generating finishes, as torch cannot be interrupted). Either way its place in
the queue is freed at once, it is counted once in ``stats.expired``, and its waiter is
told once (``DeadlinePassed``: a cancelled waiter, the server's own timeout, is told nothing).
"""

import math
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, Optional, Tuple, Union

from ..inference import Translation, TranslationOptions, Translator
from ..inference.text_codec import CheckedSentence


class QueueFull(Exception):
    """The queue cannot take the request now; ``retry_after`` is a wait in whole seconds."""

    def __init__(self, queued: int, limit: int, retry_after: int):
        super().__init__(f"the server is busy: {queued} sentences are waiting (the queue holds {limit}); "
                         f"try again in {retry_after} s")
        self.retry_after = retry_after


class ShuttingDown(Exception):
    """The server is stopping and takes no new work."""


class DeadlinePassed(Exception):
    """The job's deadline passed before its translation could start or finish."""


@dataclass(eq=False)  # a job is itself: two with the same sentences are two jobs
class Job:
    model: str
    sentences: List[CheckedSentence]  # checked by the core as the request was read, in the request's numbering
    options: TranslationOptions  # as the request's edge built them, handed to Translator.translate unchanged
    deadline: float = math.inf  # time.monotonic() after which nobody waits for the answer
    result: Future = field(default_factory=Future)
    chunks: Deque[Tuple[int, int, int]] = field(default_factory=deque)  # (start, end, tokens) of lines not yet taken
    translations: List[Optional[Translation]] = field(default_factory=list)
    unfinished: int = 0  # chunks taken or waiting whose translations have not come back
    last_round: int = -1  # the batcher's round that last took a chunk of it
    expired: bool = False  # counted in stats.expired, its place in the queue freed

    def parts(self, size: int) -> List["Job"]:
        """The job as consecutive jobs of at most ``size`` sentences each, with its options
        (a long document queued a part at a time); the job itself where it fits; none where it
        has no sentence (a LibreTranslate html text of markup only: nothing to queue)."""
        if not self.sentences:
            return []
        if len(self.sentences) <= size:
            return [self]
        return [Job(self.model, self.sentences[start: start + size], self.options)
                for start in range(0, len(self.sentences), size)]

    def abandoned(self, now: float) -> bool:
        return self.result.cancelled() or self.result.done() or now > self.deadline


@dataclass
class BatchingStats:
    calls: int = 0  # generation calls made
    sentences: int = 0  # sentences translated
    requests: int = 0  # jobs answered
    largest_call: int = 0  # most sentences in one call
    refused: int = 0  # jobs refused because the queue was full
    expired: int = 0  # jobs dropped or discarded after their deadline or their client gave up
    queued_sentences: int = 0  # sentences waiting or being translated now


def chunks_of(sentences: List[CheckedSentence], max_tokens: int, max_sentences: int) -> Deque[Tuple[int, int, int]]:
    """Consecutive (start, end, source tokens) ranges of ``sentences`` that each fit one
    generation call. A single sentence over ``max_tokens`` is a chunk of its own."""
    chunks: Deque[Tuple[int, int, int]] = deque()
    start, tokens = 0, 0
    for index, sentence in enumerate(sentences):
        count = sentence.tokens
        if index > start and (tokens + count > max_tokens or index - start >= max_sentences):
            chunks.append((start, index, tokens))
            start, tokens = index, 0
        tokens += count
    if sentences:
        chunks.append((start, len(sentences), tokens))
    return chunks


class DynamicBatcher:
    """``translators``: the models by name, or a function that loads them. A function runs
    in the generation thread itself: torch's intra-op (OpenMP) workers belong to the thread
    that first runs torch, and a second thread gets a team of its own that contends with
    the first for the cores. Loaded in the main thread and run in this one, generation
    was 1.4x (float32) and 1.7x (int8) slower on 2 cores (2026-11-26; CHANGELOG.md, Performance history)."""

    def __init__(self, translators: Union[Dict[str, Translator], Callable[[], Dict[str, Translator]]], window: float,
                 max_tokens: int, max_sentences: int, max_queued_sentences: int = 1024):
        self._load = translators if callable(translators) else (lambda: translators)
        self.translators: Dict[str, Translator] = {} if callable(translators) else translators
        self._loaded = threading.Event()
        self._load_error: Optional[BaseException] = None
        self.window = window
        # the bound of one generation call (a round): the source tokens and sentences it takes
        self.call_tokens, self.call_sentences = max_tokens, max_sentences
        self.max_queued_sentences = max_queued_sentences
        self.stats = BatchingStats()
        self.observers = []  # called with (round's sentences, tokens, seconds) after each generation call
        self._jobs: List[Job] = []  # jobs with chunks left to take, in arrival order
        self._condition = threading.Condition()
        self._stopping = False
        self._rounds = 0
        self._sentences_per_second = 0.0  # recent throughput, for Retry-After
        self._worker = threading.Thread(target=self._run, name="fconv-serve-generation", daemon=True)

    # --- the server's side --------------------------------------------------------------

    def start(self) -> Dict[str, Translator]:
        """Start the generation thread (once), which loads the models first; returns them
        when loaded, or raises what loading raised."""
        if not self._worker.is_alive() and not self._loaded.is_set():
            self._worker.start()
        self._loaded.wait()
        if self._load_error is not None:
            raise self._load_error
        return self.translators

    @property
    def ready(self) -> bool:
        return self._loaded.is_set() and self._load_error is None and self._worker.is_alive() and not self._stopping

    def submit(self, job: Job) -> Future:
        """Queue ``job``; ``QueueFull`` at once if its sentences do not fit in the queue. A job
        without a sentence is answered at once (no round would take it)."""
        if not job.sentences:
            job.result.set_result([])
            return job.result
        with self._condition:
            if self._stopping:
                raise ShuttingDown("the server is shutting down; send the request to another replica or try again")
            queued = self.stats.queued_sentences
            if queued + len(job.sentences) > self.max_queued_sentences:
                self.stats.refused += 1
                raise QueueFull(queued, self.max_queued_sentences, self._retry_after(queued))
            job.chunks = chunks_of(job.sentences, self.call_tokens, self.call_sentences)
            job.translations = [None] * len(job.sentences)
            job.unfinished = len(job.chunks)
            self.stats.queued_sentences += len(job.sentences)
            self._jobs.append(job)
            self._condition.notify_all()
        return job.result

    def stop(self) -> None:
        """Finish every job already submitted, then end the worker."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        self._worker.join()

    def _retry_after(self, queued: int) -> int:
        rate = self._sentences_per_second
        return max(1, math.ceil(queued / rate)) if rate > 0 else 1

    # --- the worker ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self.translators = self._load()
        except BaseException as error:  # told to start()'s caller
            self._load_error = error
            return
        finally:
            self._loaded.set()
        while True:
            with self._condition:
                while not self._jobs and not self._stopping:
                    self._condition.wait()
                if not self._jobs:
                    return  # stopping, and nothing left
                window_ends = time.monotonic() + self.window
                while not self._stopping and not self._round_is_full():
                    remaining = window_ends - time.monotonic()
                    if remaining <= 0:
                        break
                    self._condition.wait(remaining)
                taken = self._take_round(time.monotonic())
            self._translate_round(taken)

    def _round_is_full(self) -> bool:
        waiting = [job.chunks[0] for job in self._jobs if job.chunks]
        return sum(end - start for start, end, _ in waiting) >= self.call_sentences

    def _take_round(self, now: float) -> List[Tuple[Job, int, int, int]]:
        """Chunks for one round: one of each job in turn while the budget lasts. Jobs past
        their deadline, or whose client gave up, are dropped here."""
        for job in list(self._jobs):
            if job.abandoned(now):
                self._expire(job)
        taken, tokens, sentences = [], 0, 0
        self._rounds += 1
        # round robin: jobs served longest ago first (new ones before all), then by arrival
        order = sorted(self._jobs, key=lambda job: job.last_round)
        progress = True
        while progress:
            progress = False
            for job in order:
                if job not in self._jobs or not job.chunks:  # dropped, or all its chunks taken
                    continue
                start, end, count = job.chunks[0]
                if taken and (tokens + count > self.call_tokens or sentences + end - start > self.call_sentences):
                    continue
                if not job.result.running() and not job.result.set_running_or_notify_cancel():
                    self._expire(job)  # its client gave up a moment ago
                    continue
                job.chunks.popleft()
                job.last_round = self._rounds
                taken.append((job, start, end, count))
                tokens, sentences, progress = tokens + count, sentences + end - start, True
        self._jobs = [job for job in self._jobs if job.chunks]
        return taken

    def _expire(self, job: Job) -> None:
        """Under the lock: ``job`` is no longer waited for: its remaining chunks forgotten,
        its place in the queue freed and its waiter told, once."""
        if job in self._jobs:
            self._jobs.remove(job)
        job.chunks.clear()
        if job.expired or (job.result.done() and not job.result.cancelled()):
            return  # counted already, or answered
        job.expired = True
        self.stats.queued_sentences -= len(job.sentences)
        self.stats.expired += 1
        if not job.result.done():  # a waiter still there hears why (a cancelled one has gone)
            job.result.set_exception(DeadlinePassed("the deadline passed during the translation" if job.result.running()
                                                    else "the deadline passed before the translation started"))

    def _translate_round(self, taken: List[Tuple[Job, int, int, int]]) -> None:
        """The round's chunks, one generation call for each (model, options) among them."""
        groups: List[Tuple[Tuple[str, TranslationOptions], List[Tuple[Job, int, int, int]]]] = []
        for chunk in taken:  # by equality: an options value need not be hashable (a replace_unk dictionary)
            key = (chunk[0].model, chunk[0].options)
            group = next((group for known, group in groups if known == key), None)
            if group is None:
                groups.append((key, [chunk]))
            else:
                group.append(chunk)
        for (model, options), group in groups:
            sentences = [sentence for job, start, end, _ in group for sentence in job.sentences[start:end]]
            owners = [job for job, start, end, _ in group for _ in range(start, end)]
            began = time.monotonic()
            try:
                translations = self.translators[model].translate(
                    sentences, options, still_wanted=lambda i: not owners[i].abandoned(time.monotonic()))
            except Exception as error:  # every waiting client hears of it; the worker goes on
                with self._condition:
                    for job, _, _, _ in group:
                        self._fail(job, error)
                continue
            seconds = time.monotonic() - began
            translated = [i for i, translation in enumerate(translations) if translation is not None]
            with self._condition:
                self._count_call(len(translated), seconds)
                offset = 0
                for job, start, end, _ in group:
                    job.translations[start:end] = translations[offset: offset + end - start]
                    if any(t is None for t in translations[offset: offset + end - start]):
                        self._expire(job)  # it left the round
                    offset += end - start
                    self._chunk_done(job)
            for observer in self.observers:
                observer(len(translated), sum(sentences[i].tokens for i in translated), seconds)

    def _count_call(self, sentences: int, seconds: float) -> None:
        if not sentences:
            return  # every job of the call expired before its first batch
        self.stats.calls += 1
        self.stats.sentences += sentences
        self.stats.largest_call = max(self.stats.largest_call, sentences)
        rate = sentences / max(seconds, 1e-6)
        self._sentences_per_second = rate if self._sentences_per_second == 0 else 0.8 * self._sentences_per_second + 0.2 * rate

    def _chunk_done(self, job: Job) -> None:
        job.unfinished -= 1
        if job.unfinished > 0 or job.result.done():
            return
        if time.monotonic() > job.deadline:  # nobody waits for it any more: discarded
            self._expire(job)
            return
        self.stats.queued_sentences -= len(job.sentences)
        self.stats.requests += 1
        job.result.set_result(job.translations)

    def _fail(self, job: Job, error: Exception) -> None:
        if job in self._jobs:
            self._jobs.remove(job)
        job.chunks.clear()
        if not job.result.done():
            self.stats.queued_sentences -= len(job.sentences)
            job.result.set_exception(error)
