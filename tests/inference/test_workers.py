"""Decoding processes (``translate(workers=N)``): the translations of one process, in the
order given, from processes other than this one; a dead worker is a one-line error and the
next call starts afresh."""

import multiprocessing
import os
import random
import signal

import pytest
import torch

from fconv_plugin import backend
from fconv_plugin.errors import FConvError
from fconv_plugin.inference import Translator
from fconv_plugin.inference.workers import check_workers
from fconv_plugin.deployment import int8

pytestmark = pytest.mark.slow  # trains a model


def _sentences(count, seed):
    rng = random.Random(seed)
    return [" ".join(f"s{rng.randrange(30)}" for _ in range(rng.randint(3, 9))) for _ in range(count)]


def _worker_pids():
    return sorted(p.pid for p in multiprocessing.active_children())


@pytest.fixture(scope="module", params=["vectorised", "fairseq"])
def translator(trained_model, request):
    data_bin, save_dir, _ = trained_model
    translator = Translator.from_pretrained(save_dir / "checkpoint_best.pt", data_bin, beam=5, search=request.param)
    yield translator
    translator.close()


def _hypotheses(results):
    return [(h.text, h.tokens, h.alignment) for r in results for h in r.hypotheses]


def _scores(results):
    return [s for r in results for h in r.hypotheses for s in [h.score, *h.positional_scores]]


def test_workers_give_one_process_translations_in_the_order_given(translator):
    lines = _sentences(40, seed=3)
    before = set(_worker_pids())
    alone = translator.translate(lines, max_sentences=3, nbest=2, alignment=True)
    sizes = []
    together = translator.translate(lines, max_sentences=3, nbest=2, alignment=True, workers=2, progress=sizes.append)
    assert [r.source for r in together] == lines
    assert _hypotheses(together) == _hypotheses(alone)
    assert max(abs(a - b) for a, b in zip(_scores(together), _scores(alone))) < 1e-4
    assert sum(sizes) == 40 and len(sizes) == 14 and max(sizes) == 3  # one progress call per batch of 3
    workers = set(_worker_pids()) - before
    assert len(workers) == 2 and os.getpid() not in workers  # two processes besides this one
    # the next call reuses them, a call with another count has its own; close() ends them all
    translator.translate(lines[:5], workers=2)
    assert set(_worker_pids()) - before == workers
    assert _hypotheses(translator.translate(lines, max_sentences=3, nbest=2, alignment=True, workers=3)) == _hypotheses(alone)
    assert len(set(_worker_pids()) - before) == 5 and workers <= set(_worker_pids())
    translator.close()
    assert set(_worker_pids()) - before == set()


def test_a_worker_that_dies_is_a_one_line_error_and_the_next_call_starts_afresh(translator):
    lines = _sentences(12, seed=5)
    expected = [r.best.text for r in translator.translate(lines)]
    before = set(_worker_pids())
    translator.translate(lines[:2], workers=2)
    os.kill(max(set(_worker_pids()) - before), signal.SIGKILL)
    with pytest.raises(FConvError, match=r"^a decoding process ended unexpectedly \(out of memory\?\); give fewer workers"):
        translator.translate(lines, max_sentences=1, workers=2)
    assert [r.best.text for r in translator.translate(lines, max_sentences=1, workers=2)] == expected
    translator.close()


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2"])
def test_a_bad_worker_count_is_one_line(translator, workers):
    with pytest.raises(FConvError, match=r"^workers .*: give a whole number of decoding processes, 1 or more$"):
        translator.translate(["s1 s2"], workers=workers)


def test_workers_are_for_cpus():
    with pytest.raises(FConvError, match="on a GPU give workers=1"):
        check_workers(2, torch.device("cuda"))
    check_workers(2, torch.device("cpu"))
    check_workers(1, torch.device("cuda"))


def test_workers_share_the_default_batch_bound_and_a_given_bound_stays(translator):
    lines = _sentences(600, seed=9)  # 4,000+ padded tokens: more than one default batch

    def padded_sizes(workers, **bounds):
        batches = list(translator.session.batches(lines, bounds.get("max_tokens"), bounds.get("max_sentences"), workers))
        assert sorted(i for ids, _, _ in batches for i in ids) == list(range(len(lines)))
        return [src.numel() for _, src, _ in batches]

    alone, shared = padded_sizes(1), padded_sizes(2)
    assert max(alone) > 2000 and max(shared) <= 2000 and len(shared) > len(alone)
    assert padded_sizes(2, max_tokens=4000) == alone  # a bound the call gives is kept


PACKED_LOOPS = backend.packed_int8_products()
NO_PACKED_LOOPS = ("the packed int8 loops do not run here (they need the compiled int8_rows and AVX-512 VNNI; "
                   "this CPU's int8 products are torch._int_mm's): nothing is packed")


def test_an_int8_model_translates_in_workers_as_in_one_process(trained_model, int8_checkpoint):
    data_bin, _, _ = trained_model
    lines = _sentences(24, seed=11)
    fresh = Translator.from_pretrained(int8_checkpoint, data_bin, beam=5)
    together = fresh.translate(lines, max_sentences=4, workers=2)  # the parent decodes nothing itself
    fresh.close()
    alone = Translator.from_pretrained(int8_checkpoint, data_bin, beam=5).translate(lines, max_sentences=4)
    assert _hypotheses(together) == _hypotheses(alone)
    assert max(abs(a - b) for a, b in zip(_scores(together), _scores(alone))) < 1e-4


@pytest.mark.skipif(not PACKED_LOOPS, reason=NO_PACKED_LOOPS)
def test_an_int8_model_is_packed_once_in_the_parent_before_the_workers_fork(trained_model, int8_checkpoint):
    data_bin, _, _ = trained_model
    fresh = Translator.from_pretrained(int8_checkpoint, data_bin, beam=5)
    weights = [m for m in fresh.models[0].modules() if isinstance(m, int8.Int8Weight)]
    assert weights and all(w._packed_for is None for w in weights)
    fresh.translate(_sentences(8, seed=11), max_sentences=4, workers=2)  # the parent decodes nothing itself
    assert all(w._packed_for == (w.weight.data_ptr(), w.weight._version) for w in weights)
    fresh.close()
