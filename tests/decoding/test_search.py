"""The inference core's beam search against fairseq's SequenceGenerator driving the same model.

The plugin's model with random weights (</s> made likely, so that hypotheses end at
different steps and sentences leave the batch at different times). Every finished
hypothesis must be fairseq's: the same tokens in the same order, bit-identical scores,
positional scores and attention, for each option the inference core passes.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from fairseq import search as fairseq_search
from fairseq.ngram_repeat_block import NGramRepeatBlock
from fairseq.sequence_generator import SequenceGenerator

from fconv_plugin import backend
from fconv_plugin.decoding import search as beam_search
from fconv_plugin.decoding.search import BeamSearch, FairseqIncrementalSteps, block_repeated_ngrams
from tests.support import DictionaryTask, build_pair, build_plugin_model, make_dictionary, translation_batch
from tests.support import needs_compiled

SRC, TGT = make_dictionary(40, "s"), make_dictionary(30, "t")
SMALL = dict(encoder_embed_dim=24, decoder_embed_dim=24, decoder_out_embed_dim=16,
             encoder_layers="[(32, 3)] * 2", decoder_layers="[(32, 3), (32, 2)]")
SOURCE_LENGTHS = [7, 3, 9, 5, 9, 2, 6, 4]


def _model(int8: bool = False):
    torch.manual_seed(0)
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT), **SMALL)
    with torch.no_grad():
        model.decoder.fc3.weight_g.mul_(3.0)  # peaked distributions: fewer near-ties
        model.decoder.fc3.bias[TGT.eos()] += 0.5  # </s> likelier: hypotheses end at many steps
    model.eval()
    if int8:
        model.quantize_int8_()
    return model


@pytest.fixture(scope="module")
def model():
    return _model()


def _batch(seed):
    src, lengths, _, _ = translation_batch(SRC, TGT, SOURCE_LENGTHS, [1] * len(SOURCE_LENGTHS), seed=seed)
    return src, lengths


def _fairseq(model, src, lengths, prefix_tokens=None, blocker=None, **options):
    generator = SequenceGenerator([model], TGT, **options)
    if blocker is not None:
        generator.repeat_ngram_blocker = blocker
    with torch.no_grad():
        return generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}},
                                  prefix_tokens=prefix_tokens)


def _assert_same(ours, theirs, attention=False):
    lengths_seen = set()
    for sentence, (mine, fairseqs) in enumerate(zip(ours, theirs)):
        assert len(mine) == len(fairseqs), sentence
        for a, b in zip(mine, fairseqs):
            assert torch.equal(a["tokens"], b["tokens"]), sentence
            assert torch.equal(a["score"], b["score"]), sentence
            assert torch.equal(a["positional_scores"], b["positional_scores"]), sentence
            if attention:
                assert a["attention"].shape == b["attention"].shape and a["attention"].numel() > 0
                assert torch.equal(a["attention"], b["attention"]), sentence
            lengths_seen.add(len(a["tokens"]))
    assert len(ours) == len(theirs)
    return lengths_seen


OPTION_SETS = [
    dict(beam_size=5),
    dict(beam_size=1),
    dict(beam_size=4, len_penalty=0.6, max_len_a=1.0, max_len_b=2),  # short limit: sentences stopped there
    dict(beam_size=3, len_penalty=1.4, max_len_b=12, unk_penalty=1.5),
    dict(beam_size=5, min_len=6, max_len_b=15),
    dict(beam_size=6, unk_penalty=-3.0, normalize_scores=False),  # unks favoured; raw sums
]


@pytest.mark.parametrize("one_pass", [pytest.param(True, marks=needs_compiled("beam_candidates"), id="compiled candidates"),
                                      pytest.param(False, id="torch operations")])
@pytest.mark.parametrize("options", OPTION_SETS)
def test_every_finished_hypothesis_is_fairseqs(model, options, one_pass):
    src, lengths = _batch(seed=options["beam_size"])
    expected = _fairseq(model, src, lengths, **options)
    search = BeamSearch(model, TGT, one_pass=one_pass, **options)
    assert search.one_pass == one_pass
    actual = search.generate(src, lengths)
    lengths_seen = _assert_same(actual, expected)
    assert len(lengths_seen) > 2  # hypotheses really ended at different steps


def test_the_attention_for_alignments_is_fairseqs(model):
    attending = model.returning_attention()
    src, lengths = _batch(seed=11)
    expected = _fairseq(attending, src, lengths, beam_size=4)
    actual = BeamSearch(attending, TGT, beam_size=4).generate(src, lengths, attention=True)
    _assert_same(actual, expected, attention=True)


def test_a_half_precision_models_attention_is_kept_in_float32_as_fairseq_keeps_it():
    """--fp16/--bf16 on a GPU: the model's attention comes in half precision, and fairseq
    keeps it (and the scores) in float32. bfloat16 on the CPU shows the same."""
    attending = _model().to(torch.bfloat16).returning_attention()
    src, lengths = _batch(seed=11)
    expected = _fairseq(attending, src, lengths, beam_size=4)
    actual = BeamSearch(attending, TGT, beam_size=4).generate(src, lengths, attention=True)
    _assert_same(actual, expected, attention=True)
    assert actual[0][0]["attention"].dtype == torch.float32


def test_prefixes_of_different_lengths_are_forced_as_fairseq_forces_them(model):
    src, lengths = _batch(seed=5)
    generator = torch.Generator().manual_seed(5)
    prefix = torch.randint(TGT.nspecial, len(TGT), (len(SOURCE_LENGTHS), 3), generator=generator)
    prefix[1, 1:] = TGT.pad()  # a one-token prefix
    prefix[4, 2:] = TGT.pad()
    expected = _fairseq(model, src, lengths, prefix_tokens=prefix, beam_size=4)
    actual = BeamSearch(model, TGT, beam_size=4).generate(src, lengths, prefix_tokens=prefix)
    _assert_same(actual, expected)
    for sentence, hypotheses in enumerate(actual):
        wanted = [t for t in prefix[sentence].tolist() if t != TGT.pad()]
        assert all(h["tokens"][: len(wanted)].tolist() == wanted for h in hypotheses)


def test_int8_models_search_as_fairseq_searches_them():
    int8 = _model(int8=True)
    src, lengths = _batch(seed=3)
    _assert_same(BeamSearch(int8, TGT, beam_size=5).generate(src, lengths), _fairseq(int8, src, lengths, beam_size=5))


def test_fairseqs_incremental_protocol_searches_as_fairseq_searches():
    """The search over any other incremental decoder (fairseq's protocol, ``explicit_state=False``):
    the plugin's decoder driven that way, and fairseq's own fconv."""
    src, lengths = _batch(seed=4)
    plugin = _model()
    search = BeamSearch(plugin, TGT, beam_size=5, explicit_state=False)
    assert isinstance(search.steps, FairseqIncrementalSteps)
    _assert_same(search.generate(src, lengths), _fairseq(plugin, src, lengths, beam_size=5))
    torch.manual_seed(0)
    _, fairseqs_fconv = build_pair("fconv_iwslt_de_en", DictionaryTask(SRC, TGT), **SMALL)
    fairseqs_fconv.eval()
    search = BeamSearch(fairseqs_fconv, TGT, beam_size=5)
    assert isinstance(search.steps, FairseqIncrementalSteps)
    _assert_same(search.generate(src, lengths), _fairseq(fairseqs_fconv, src, lengths, beam_size=5))


def test_one_search_used_from_several_threads_answers_as_one_call_at_a_time(model):
    """The decoding state belongs to each call (decoding/steps.DecodingState), not to the search."""
    search = BeamSearch(model, TGT, beam_size=4)
    batches = [_batch(seed) for seed in range(6)]
    alone = [search.generate(*batch) for batch in batches]
    with ThreadPoolExecutor(max_workers=3) as pool:
        together = list(pool.map(lambda batch: search.generate(*batch), batches * 2))
    for expected, actual in zip(alone * 2, together):
        _assert_same(actual, expected)


class WordsOnlyBlocker(NGramRepeatBlock):
    """fairseq's CPU n-gram blocker handed the hypothesis' words, not its whole padded
    buffer, where it never blocks (fairseq issues #4709, #5206; ``compat.ngram_blocking``
    mends it so for fairseq's commands)."""

    def forward(self, tokens, lprobs, bsz, beam_size, step):
        return self._no_repeat_ngram(tokens[:, : step + 1], lprobs, bsz, beam_size, step)


def _ngrams(tokens, n):
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


@pytest.mark.parametrize("one_pass", [pytest.param(True, marks=needs_compiled("beam_candidates"), id="compiled candidates"),
                                      pytest.param(False, id="torch operations")])
@pytest.mark.parametrize("n", [2, 3])
def test_repeated_ngrams_are_blocked_as_fairseqs_blocker_blocks_them_given_the_words(model, n, one_pass):
    src, lengths = _batch(seed=n)
    options = dict(beam_size=4, max_len_b=25)
    with torch.no_grad():
        model.decoder.fc3.bias[TGT.eos()] -= 3.0  # long outputs, where words repeat
    try:
        expected = _fairseq(model, src, lengths, blocker=WordsOnlyBlocker(n, use_extension=False), **options)
        actual = BeamSearch(model, TGT, no_repeat_ngram_size=n, one_pass=one_pass, **options).generate(src, lengths)
        unblocked = BeamSearch(model, TGT, **options).generate(src, lengths)
    finally:
        with torch.no_grad():
            model.decoder.fc3.bias[TGT.eos()] += 3.0
    _assert_same(actual, expected)
    repeats = lambda hyps: sum(  # noqa: E731
        len(g) - len(set(g)) for h in hyps for g in [_ngrams([TGT.eos()] + h[0]["tokens"].tolist()[:-1], n)])
    assert repeats(unblocked) > 0  # without blocking, the outputs do repeat n-grams
    assert repeats(actual) == 0


def test_block_repeated_ngrams_by_hand():
    eos = TGT.eos()
    tokens = torch.tensor([[eos, 5, 6, 7, 5, 6], [eos, 5, 6, 7, 8, 9], [eos, 5, 5, 5, 5, 5]])
    lprobs = torch.zeros(3, 12)
    block_repeated_ngrams(tokens, lprobs, 3)  # last two words "5 6" were followed by 7: ban 7
    assert lprobs[0].isinf().nonzero().flatten().tolist() == [7]
    assert not lprobs[1].isinf().any()
    assert lprobs[2].isinf().nonzero().flatten().tolist() == [5]
    lprobs = torch.zeros(3, 12)
    block_repeated_ngrams(tokens, lprobs, 2)  # after "6" came 7; after "9" nothing; after "5": 6 and 5
    assert [row.isinf().nonzero().flatten().tolist() for row in lprobs] == [[7], [], [5]]
    lprobs = torch.zeros(1, 12)
    block_repeated_ngrams(tokens[:1], lprobs, 1)  # every word produced, not the opening </s>
    assert lprobs[0].isinf().nonzero().flatten().tolist() == [5, 6, 7]


def test_min_len_beyond_the_maximum_length_is_one_clear_error(model):
    src, lengths = _batch(seed=1)
    with pytest.raises(Exception, match="min_len 9 is longer than the longest output allowed"):
        BeamSearch(model, TGT, min_len=9, max_len_b=4).generate(src, lengths)


@needs_compiled("beam_candidates")
def test_only_plain_beam_search_with_one_model_takes_the_vectorised_path(model):
    def generator(**kwargs):
        return SequenceGenerator([model], TGT, beam_size=4, **kwargs)

    plain = BeamSearch.like(generator(len_penalty=0.7, unk_penalty=0.2, min_len=2, no_repeat_ngram_size=3), model)
    assert (plain.beam, plain.len_penalty, plain.unk_penalty, plain.min_len, plain.no_repeat_ngram_size) == (4, 0.7, 0.2, 2, 3)
    assert plain.one_pass and not BeamSearch.like(generator(), model, one_pass=False).one_pass
    assert BeamSearch.like(generator(search_strategy=fairseq_search.Sampling(TGT)), model) is None
    assert BeamSearch.like(generator(temperature=0.5), model) is None
    assert BeamSearch.like(generator(match_source_len=True), model) is None
    ensemble = SequenceGenerator([model, _model()], TGT, beam_size=4)
    assert BeamSearch.like(ensemble, model) is None


@needs_compiled("beam_candidates")
def test_the_compiled_bookkeeping_keeps_the_books_where_nothing_needs_the_torch_form(model):
    """beam_candidates.cpp's Bookkeeping for plain searches on the CPU; the torch form where
    the attention is kept or prefixes are forced (or the compiled passes are off)."""
    cpu = torch.device("cpu")
    search = BeamSearch(model, TGT, beam_size=3)
    candidates = backend.select(cpu, torch.float32).candidates  # the search's one selection (generate)
    assert isinstance(search._bookkeeping(2, 10, 5, False, False, cpu, candidates), candidates.Bookkeeping)
    assert isinstance(search._bookkeeping(2, 10, 5, True, False, cpu, candidates), beam_search._Bookkeeping)
    assert isinstance(search._bookkeeping(2, 10, 5, False, True, cpu, candidates), beam_search._Bookkeeping)
    assert isinstance(search._bookkeeping(2, 10, 5, False, False, cpu, None), beam_search._Bookkeeping)


@needs_compiled("beam_candidates")
def test_whole_steps_run_compiled_where_nothing_but_the_candidates_sits_between_decoder_and_books(model):
    """Bookkeeping.run_steps drives the compiled decoding for plain searches; a search that
    keeps the attention or blocks n-grams steps from Python (both against fairseq above)."""
    src, lengths = _batch(seed=1)
    cpu = torch.device("cpu")
    search = BeamSearch(model, TGT, beam_size=3)
    with torch.no_grad():
        state = search.steps.start(model.encoder(src_tokens=src, src_lengths=lengths))
    candidates = backend.select(cpu, torch.float32).candidates
    book = search._bookkeeping(len(lengths), 10, src.size(1), False, False, cpu, candidates)
    assert search._compiled_steps(book, state, attention=False) is state.compiled is not None
    assert search._compiled_steps(book, state, attention=True) is None
    assert BeamSearch(model, TGT, beam_size=3, no_repeat_ngram_size=2)._compiled_steps(book, state, False) is None
    torch_book = search._bookkeeping(len(lengths), 10, src.size(1), True, False, cpu, candidates)
    assert search._compiled_steps(torch_book, state, attention=False) is None
    python_steps = BeamSearch(model, TGT, beam_size=3, explicit_state=False)
    assert python_steps._compiled_steps(book, python_steps.steps.start(
        model.encoder(src_tokens=src, src_lengths=lengths)), attention=False) is None
