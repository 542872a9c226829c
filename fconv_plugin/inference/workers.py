"""Decoding processes: a call's batches decoded several at a time, one CPU thread each.

At beam 5 a small model's step is a few dozen rows: its matrix products are too small to
keep two cores busy, and much of a step is work that runs on one core anyway (the
search's bookkeeping, small element-wise operations, Python). Decoding whole batches side
by side, one thread each, keeps every core busy instead. It is what CPU engines do for
throughput: Marian's ``--cpu-threads N`` (N workers of one thread), CTranslate2's
``inter_threads``.

The workers are processes forked from the translator's own (they share its loaded model's
memory and need no second load). Threads sharing one translator now come close where the
compiled step runs (it and the search's books release the GIL), but not everywhere: on the
quickstart's model, against one search with torch's two threads, 2 threads of one torch
thread were 1.02-1.36x as fast, 2 processes 1.08-1.34x; int8 in fconv-translate's default
batches 1.02x against 1.18x (2026-11-27, the machine of ``docs/performance.md``;
CHANGELOG.md, Performance history). Each worker runs torch with one thread: GNU OpenMP, which torch's
CPU build uses, hangs in a forked child that starts a parallel region after its parent ran one.

A worker runs the same search on the same model; only its products run on one thread
instead of several. On the quickstart's 500 test verses that changed no translation and
no score's bits (``benchmarks/vs_ctranslate2.py`` says when a translation differs); the
tests ask for the same texts and scores within 1e-4 (``tests/inference/test_workers.py``).
"""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Iterable, Iterator, List, Tuple

import torch

from ..errors import FConvError

_session = None  # the worker's copy of its translator's batch session (set once, in the worker only)


def check_workers(workers: int, device: torch.device) -> None:
    """One line naming the problem when ``workers`` cannot decode here."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise FConvError(f"workers {workers!r}: give a whole number of decoding processes, 1 or more")
    if workers > 1 and device.type != "cpu":
        raise FConvError(f"workers {workers}: decoding processes share CPU cores; on a GPU give workers=1")
    if workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        raise FConvError(f"workers {workers}: this system cannot fork processes; give workers=1")


def _start(session) -> None:
    global _session
    torch.set_num_threads(1)  # see the module's docstring: no OpenMP region in a forked child
    session.adopt_in_worker()
    _session = session


def _decode(job: tuple):
    return _session.translate_batch(*job)


class DecodingWorkers:
    """``workers`` processes, forked from this one with a translator's ``session``
    (``batch_session.BatchSession``) in them, decoding batches (its ``translate_batch``'s
    arguments) in turn; results in the order given."""

    def __init__(self, session, workers: int):
        self.workers = workers
        self.broken = False
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                         initializer=_start, initargs=(session,))

    def map(self, jobs: Iterable[tuple]) -> Iterator[Tuple[tuple, object]]:
        """(job, result) for every job, in the jobs' order, at most 2 x workers in flight."""
        pending: List[tuple] = []
        try:
            for job in jobs:
                pending.append((job, self._pool.submit(_decode, job)))
                while len(pending) > 2 * self.workers:
                    job, future = pending.pop(0)
                    yield job, future.result()
            while pending:
                job, future = pending.pop(0)
                yield job, future.result()
        except BrokenProcessPool:
            self.broken = True
            raise FConvError(f"a decoding process ended unexpectedly (out of memory?); give fewer workers "
                             f"than {self.workers} or workers=1") from None
        finally:
            for _, future in pending:
                future.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
