"""Back-pressure in the batcher, counted: a bounded queue refuses at once, a large request
is spread over generation calls, late jobs are dropped or discarded.

The batcher runs with a stand-in of the inference core's Translator whose 'translation'
is hand-checkable (each sentence upper-cased) and whose calls can be held open; the
server's answers against fairseq-interactive are tests/serve/test_server.py's."""

import threading
import time

import pytest

from fconv_plugin.inference import Hypothesis, Translation, TranslationOptions
from fconv_plugin.inference.text_codec import checked_sentence
from fconv_plugin.serve.batching import DeadlinePassed, DynamicBatcher, Job, QueueFull, ShuttingDown, chunks_of


class HeldTranslator:
    """Translates by upper-casing; each call waits until ``release`` is set (if given)."""

    def __init__(self, seconds_per_call: float = 0.0):
        self.calls = []  # the sentences of each call
        self.options = []  # the options value each call was handed
        self.release = threading.Event()
        self.release.set()
        self.seconds_per_call = seconds_per_call
        self.started = threading.Event()

    def translate(self, sentences, options=None, **asked):
        lines = [sentence.text for sentence in sentences]
        self.calls.append(list(lines))
        self.options.append(options)
        self.started.set()
        self.release.wait(10)
        time.sleep(self.seconds_per_call)
        return [Translation(line, [Hypothesis(line.upper(), [], 0.0, [])]) for line in lines]


def _checked(lines):
    return [checked_sentence(line, lambda text: text, 1000) for line in lines]


def _job(lines, deadline=float("inf"), options=TranslationOptions()):
    return Job("m", _checked(lines), options, deadline=deadline)


def _batcher(translator, **limits):
    options = dict(window=0.0, max_tokens=1000, max_sentences=8, max_queued_sentences=64)
    options.update(limits)
    batcher = DynamicBatcher({"m": translator}, **options)
    batcher.start()
    return batcher


def _texts(future):
    return [t.best.text for t in future.result(timeout=10)]


def test_chunks_fit_one_call_each():
    lines = ["a b", "c", "d e f g", "h", "i j k l m n o p q"]  # 3, 2, 5, 2, 10 tokens with </s>
    assert list(chunks_of(_checked(lines), max_tokens=7, max_sentences=8)) == [(0, 2, 5), (2, 4, 7), (4, 5, 10)]
    assert list(chunks_of(_checked(lines), max_tokens=100, max_sentences=2)) == [(0, 2, 5), (2, 4, 7), (4, 5, 10)]
    assert list(chunks_of(_checked(lines), max_tokens=100, max_sentences=8)) == [(0, 5, 22)]
    assert list(chunks_of([], 10, 10)) == []


def test_a_large_request_is_spread_over_calls_and_a_small_one_gets_in_after_one_of_them():
    translator = HeldTranslator()
    translator.release.clear()
    batcher = _batcher(translator)
    big = [f"big {i}" for i in range(40)]  # 5 calls of 8
    big_future = batcher.submit(_job(big))
    assert translator.started.wait(5)  # the first chunk is generating
    small_future = batcher.submit(_job(["small one", "small two"]))
    translator.release.set()
    assert _texts(small_future) == ["SMALL ONE", "SMALL TWO"]
    assert _texts(big_future) == [line.upper() for line in big]
    batcher.stop()
    # no call over the budget; the small request went into the second call, before the big one's next chunk
    assert all(len(call) <= 8 for call in translator.calls)
    assert translator.calls[1] == ["small one", "small two"] and len(translator.calls) == 6
    assert batcher.stats.requests == 2 and batcher.stats.queued_sentences == 0


def test_a_round_makes_one_call_per_model_and_options_and_hands_the_options_value_down_as_built():
    translator = HeldTranslator()
    translator.release.clear()
    batcher = _batcher(translator)
    first = batcher.submit(_job(["first"]))
    assert translator.started.wait(5)  # the next three wait for one round
    narrow, aligned = TranslationOptions().with_(beam=2), TranslationOptions(alignment=True)
    futures = [batcher.submit(_job(lines, options=options))
               for lines, options in ((["a"], narrow), (["b"], aligned), (["c", "d"], TranslationOptions().with_(beam=2)))]
    translator.release.set()
    assert _texts(first) == ["FIRST"] and [_texts(f) for f in futures] == [["A"], ["B"], ["C", "D"]]
    batcher.stop()
    assert translator.calls[1:] == [["a", "c", "d"], ["b"]]  # equal options share a call, in arrival order
    assert translator.options[1] is narrow and translator.options[2] is aligned


def test_a_job_without_a_sentence_is_answered_at_once_and_has_no_part_to_queue():
    translator = HeldTranslator()
    translator.release.clear()  # a round would wait: the answer must not
    batcher = _batcher(translator)
    empty = _job([])
    assert empty.parts(4) == []
    assert batcher.submit(empty).result(timeout=0) == []
    assert (translator.calls, batcher.stats.queued_sentences) == ([], 0)
    translator.release.set()
    batcher.stop()


def test_a_full_queue_refuses_at_once_with_a_wait_to_suggest():
    translator = HeldTranslator()
    translator.release.clear()
    batcher = _batcher(translator, max_queued_sentences=20)
    accepted, refused = [], 0
    began = time.monotonic()
    for i in range(10):  # 10 requests of 4 sentences into a queue of 20
        try:
            accepted.append(batcher.submit(_job([f"r{i} s{j}" for j in range(4)])))
        except QueueFull as full:
            refused += 1
            assert full.retry_after >= 1 and "the queue holds 20" in str(full)
    assert time.monotonic() - began < 1.0  # refusals are immediate
    assert (len(accepted), refused, batcher.stats.refused) == (5, 5, 5)
    translator.release.set()
    assert [len(_texts(f)) for f in accepted] == [4] * 5
    assert batcher.submit(_job(["after"])).result(timeout=10)[0].best.text == "AFTER"  # room again
    batcher.stop()
    with pytest.raises(ShuttingDown):
        batcher.submit(_job(["late"]))


def test_a_job_past_its_deadline_is_dropped_before_generation_and_one_that_expires_during_it_is_discarded():
    translator = HeldTranslator()
    translator.release.clear()
    batcher = _batcher(translator, max_sentences=2)
    running = batcher.submit(_job(["first a", "first b", "first c"], deadline=time.monotonic() + 0.3))
    assert translator.started.wait(5)
    expired = batcher.submit(_job(["never translated"], deadline=time.monotonic() - 1))
    on_time = batcher.submit(_job(["on time"]))
    time.sleep(0.4)  # 'running' passes its deadline while its first chunk generates
    translator.release.set()
    assert _texts(on_time) == ["ON TIME"]
    with pytest.raises(DeadlinePassed):
        running.result(timeout=10)
    with pytest.raises(DeadlinePassed, match="before the translation started"):
        expired.result(timeout=10)
    batcher.stop()
    translated = [line for call in translator.calls for line in call]
    assert "never translated" not in translated and "first c" not in translated  # its second chunk never ran
    assert (batcher.stats.expired, batcher.stats.requests, batcher.stats.queued_sentences) == (2, 1, 0)


class BatchedTranslator(HeldTranslator):
    """Translates in batches of two, asking ``still_wanted`` before each, as the inference
    core does; the first batch waits for ``release``."""

    def translate(self, sentences, options=None, still_wanted=None, **asked):
        lines = [sentence.text for sentence in sentences]
        self.calls.append(list(lines))
        results = [None] * len(lines)
        for start in range(0, len(lines), 2):
            if start == 2:
                self.started.set()
                self.release.wait(10)
            for i in range(start, min(start + 2, len(lines))):
                if still_wanted is None or still_wanted(i):
                    results[i] = Translation(lines[i], [Hypothesis(lines[i].upper(), [], 0.0, [])])
        return results


def test_a_job_that_expires_during_a_call_leaves_it_at_the_next_batch_counted_once():
    translator = BatchedTranslator()
    translator.release.clear()
    batcher = _batcher(translator, max_sentences=8, window=0.2)
    late = batcher.submit(_job(["late a", "late b", "late c", "late d"], deadline=time.monotonic() + 0.3))
    on_time = batcher.submit(_job(["on time a", "on time b"]))
    assert translator.started.wait(5)  # the call's first batch (late a, late b) is done
    time.sleep(0.4)  # 'late' passes its deadline while the call goes on
    translator.release.set()
    assert _texts(on_time) == ["ON TIME A", "ON TIME B"]
    with pytest.raises(DeadlinePassed):
        late.result(timeout=10)
    batcher.stop()
    assert translator.calls == [["late a", "late b", "late c", "late d", "on time a", "on time b"]]
    stats = batcher.stats
    assert (stats.expired, stats.requests, stats.queued_sentences, stats.calls, stats.sentences) == (1, 1, 0, 1, 4)
