"""Dynamic batching: sentences of requests that arrive together go through one generation call.

A request becomes a ``Job`` (its sentences and options). One worker thread owns the
model: it takes the first waiting job, then keeps taking jobs for ``window`` seconds
or until ``max_tokens`` source tokens (or ``max_sentences``) are gathered, and
translates each group of jobs with the same model and options in one call. A job
that would overflow the budget waits for the next round; a job whose client gave up
before its round started is dropped.
"""

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Dict, List

from ..inference import Translator


@dataclass
class Job:
    model: str
    lines: List[str]
    encoded: List[str]  # each line after tokenizer and BPE, as the model's dictionary reads it
    tokens: int  # source tokens of all lines, as the model reads them
    beam: int
    alignment: bool = False
    attention: bool = False
    items: list = field(default_factory=list)  # the request's texts (app.Item): how ``lines`` make its answers
    result: Future = field(default_factory=Future)

    @property
    def options(self) -> tuple:
        return (self.model, self.beam, self.alignment, self.attention)


@dataclass
class BatchingStats:
    calls: int = 0  # generation calls made
    sentences: int = 0  # sentences translated
    requests: int = 0  # jobs answered
    largest_call: int = 0  # most sentences in one call


_STOP = object()


class DynamicBatcher:
    def __init__(self, translators: Dict[str, Translator], window: float, max_tokens: int, max_sentences: int):
        self.translators = translators
        self.window = window
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.stats = BatchingStats()
        self._queue: "queue.Queue" = queue.Queue()
        self._carried = []  # jobs that did not fit in the last round
        self._worker = threading.Thread(target=self._run, name="fconv-serve-generation", daemon=True)

    def start(self) -> None:
        self._worker.start()

    def submit(self, job: Job) -> Future:
        self._queue.put(job)
        return job.result

    def stop(self) -> None:
        """Finish every job already submitted, then end the worker."""
        self._queue.put(_STOP)
        self._worker.join()

    def _run(self) -> None:
        stopping = False
        while not (stopping and not self._carried):
            first = self._carried.pop(0) if self._carried else self._queue.get()
            if first is _STOP:
                stopping = True
                continue
            jobs = [first]
            tokens, sentences = first.tokens, len(first.lines)
            deadline = time.monotonic() + self.window
            while not stopping and tokens < self.max_tokens and sentences < self.max_sentences:
                if self._carried:
                    job = self._carried.pop(0)
                else:
                    try:
                        job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                    except queue.Empty:
                        break
                if job is _STOP:
                    stopping = True
                    break
                if tokens + job.tokens > self.max_tokens or sentences + len(job.lines) > self.max_sentences:
                    self._carried.append(job)
                    break
                jobs.append(job)
                tokens, sentences = tokens + job.tokens, sentences + len(job.lines)
            self._translate_round(jobs)
        self._drain_after_stop()

    def _drain_after_stop(self) -> None:
        """Jobs submitted after stop() still get an answer: translated one round each."""
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not _STOP:
                self._translate_round([job])

    def _translate_round(self, jobs: List[Job]) -> None:
        groups: Dict[tuple, List[Job]] = {}
        for job in jobs:
            if job.result.set_running_or_notify_cancel():  # False: its client gave up
                groups.setdefault(job.options, []).append(job)
        for (model, beam, alignment, attention), group in groups.items():
            lines = [line for job in group for line in job.lines]
            encoded = [text for job in group for text in job.encoded]
            try:
                translations = self.translators[model].translate(lines, encoded=encoded, beam=beam, alignment=alignment,
                                                                 attention=attention)
            except Exception as error:  # every waiting client hears of it; the worker goes on
                for job in group:
                    job.result.set_exception(error)
                continue
            self.stats.calls += 1
            self.stats.sentences += len(lines)
            self.stats.largest_call = max(self.stats.largest_call, len(lines))
            start = 0
            for job in group:
                job.result.set_result(translations[start:start + len(job.lines)])
                start += len(job.lines)
                self.stats.requests += 1
