"""One hub model used from several threads at once answers as it does one call at a time
(the same hypotheses; scores equal up to float rounding).

The decoder keeps generation state on the model (the beam size the generator announces,
and whether attention inputs are shared across a beam); a thread with beam 1 may run
while another announces beam 5. That state must never change a result.
"""

import itertools
import pytest
from concurrent.futures import ThreadPoolExecutor

from fconv_plugin import FConvModel

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools

SENTENCES = ["s1 s2 s3 s4", "s20 s7 s7 s11 s29", "s5 s0 s14", "s9 s9 s3 s12 s17 s2", "s6", "s28 s1 s15 s4 s22 s8 s10"]
BEAMS = (1, 3, 5)


def _hub(trained_model):
    data_bin, save_dir, _ = trained_model
    return FConvModel.from_pretrained(str(save_dir), checkpoint_file="checkpoint_best.pt", data_name_or_path=str(data_bin))


def _answer(hub, sentence, beam):
    hypotheses = hub.generate(hub.encode(sentence), beam=beam)
    return [(hub.decode(h["tokens"]), float(h["score"])) for h in hypotheses]


def test_four_threads_with_mixed_beam_sizes_give_the_sequential_answers(trained_model):
    hub = _hub(trained_model)
    jobs = list(itertools.product(SENTENCES, BEAMS)) * 3  # 54 calls
    expected = {(sentence, beam): _answer(hub, sentence, beam) for sentence, beam in set(jobs)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda job: _answer(hub, *job), jobs))
    for job, answer in zip(jobs, answers):
        # the same hypotheses in the same order; scores agree to float rounding (threads
        # split torch's kernels differently: measured differences ~4e-7)
        assert [text for text, _ in answer] == [text for text, _ in expected[job]], job
        assert all(abs(a - b) < 1e-5 for (_, a), (_, b) in zip(answer, expected[job])), job
    assert {len(expected[(s, b)]) for s, b in expected} == set(BEAMS)


def test_a_stale_beam_size_on_the_model_never_changes_a_result(trained_model):
    hub = _hub(trained_model)
    decoder = hub.models[0].decoder
    expected = {beam: _answer(hub, SENTENCES[1], beam) for beam in BEAMS}
    for announced, beam in itertools.product((1, 2, 3, 5, 7), BEAMS):
        decoder.set_beam_size(announced)  # what another thread's generator may have said last
        original_set_beam_size = decoder.set_beam_size
        decoder.set_beam_size = lambda _size: None  # ... and keeps saying during this call
        try:
            answer = _answer(hub, SENTENCES[1], beam)
            assert [text for text, _ in answer] == [text for text, _ in expected[beam]], (announced, beam)
            assert all(abs(a - b) < 1e-5 for (_, a), (_, b) in zip(answer, expected[beam])), (announced, beam)
        finally:
            decoder.set_beam_size = original_set_beam_size
