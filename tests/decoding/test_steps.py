"""The decoder's explicit-state steps (decoding/steps.py) against the decoder driven
through fairseq's incremental protocol: the plugin's own (the same bits) and fairseq's
built-in fconv with the same weights (within float32 rounding), step after step, with the
beams reordered between steps as beam search reorders them. Each comparison runs the
compiled step (decoder_step.cpp, where the decoder's parts allow it) and the Python step."""

import pytest
import torch

from fconv_plugin.errors import FConvError
from fconv_plugin.decoding.search import FairseqIncrementalSteps
from fconv_plugin.decoding.steps import DecoderSteps
from tests.support import DictionaryTask, build_pair, build_plugin_model, make_dictionary, relative_error, translation_batch
from tests.support import needs_compiled

SRC, TGT = make_dictionary(40, "s"), make_dictionary(36, "t")
JOINED = make_dictionary(40, "w")
BEAM, SOURCE_LENGTHS, STEPS = 3, [7, 4, 9], 6

CONFIGS = {
    "iwslt": ("fconv_iwslt_de_en", {}),
    "wmt_en_de": ("fconv_wmt_en_de", {"decoder_layers": "[(64, 3)] * 2 + [(96, 3)] * 2",  # residual projections
                                       "encoder_layers": "[(64, 3)] * 2", "decoder_embed_dim": 48,
                                       "encoder_embed_dim": 48, "decoder_out_embed_dim": 32}),
    "odd": ("fconv", {  # no residual, a residual two blocks back, a 1-wide kernel, layers without attention
        "encoder_layers": "[(64, 2)] * 2", "decoder_layers": "[(64, 3, 0), (80, 3), (80, 1, 2), (64, 2)]",
        "decoder_attention": "[True, False, True, False]", "encoder_embed_dim": 48, "decoder_embed_dim": 48,
        "decoder_out_embed_dim": 48, "share_input_output_embed": True}),
}
NO_POSITIONS = ("fconv_iwslt_de_en", {"no_decoder_positional_embeddings": True})  # the ablation: fairseq has no such model


def _orders(rows: int):
    """Reorderings between steps: within each sentence's beam (the source stays shared), across
    sentences (one source row per hypothesis from then on), and a sentence leaving the batch."""
    generator = torch.Generator().manual_seed(5)
    within = (torch.stack([torch.randperm(BEAM, generator=generator) for _ in range(rows // BEAM)])
              + torch.arange(0, rows, BEAM).unsqueeze(1)).view(-1)
    across = torch.randperm(rows, generator=generator)
    return [within, within.flip(0).view(-1, BEAM).flip(1).reshape(-1), across, torch.arange(BEAM, rows)]


def _search_orders(rows: int):
    """Beam search's own reorderings (each row stays in its sentence, the sentences in their
    order) with the sentences kept: within each beam, twice, then the first sentence leaving."""
    generator = torch.Generator().manual_seed(6)
    within = [(torch.stack([torch.randperm(BEAM, generator=generator) for _ in range(rows // BEAM)])
               + torch.arange(0, rows, BEAM).unsqueeze(1)).view(-1) for _ in range(2)]
    return [(within[0], None), (within[1], None), (torch.arange(BEAM, rows), torch.arange(1, len(SOURCE_LENGTHS)))]


def _decode(model, steps, src_dict, tgt_dict, attention=True, within_sentences=False):
    """Every step's (log-probabilities, averaged attention) for random prefixes of beam x sentences rows,
    reordered by ``reorder`` or, ``within_sentences``, by ``reorder_within_sentences`` as beam search does."""
    src, lengths, _, _ = translation_batch(src_dict, tgt_dict, SOURCE_LENGTHS, [1] * len(SOURCE_LENGTHS), seed=3)
    rows = len(SOURCE_LENGTHS) * BEAM
    generator = torch.Generator().manual_seed(9)
    tokens = torch.randint(tgt_dict.nspecial, len(tgt_dict), (rows, STEPS), generator=generator)
    tokens[:, 0] = tgt_dict.eos()
    orders = iter(_search_orders(rows) if within_sentences else _orders(rows))
    if hasattr(model, "set_beam_size"):
        model.set_beam_size(BEAM)
    results = []
    with torch.no_grad():
        encoder_out = model.encoder(src, lengths)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, torch.arange(len(SOURCE_LENGTHS)).repeat_interleave(BEAM))
        state = steps.start(encoder_out)
        for step in range(STEPS):
            if step >= 2:  # the first two steps without reordering, then one of each kind
                order = next(orders, None)
                if order is not None and within_sentences:
                    order, kept = order
                    state = steps.reorder_within_sentences(state, order, kept)
                    tokens = tokens.index_select(0, order)
                elif order is not None:
                    state = steps.reorder(state, order)
                    tokens = tokens.index_select(0, order)
            results.append(steps.log_probs(state, tokens[:, : step + 1], attention))
    return results


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pair(request):
    arch, overrides = CONFIGS[request.param]
    torch.manual_seed(1)
    ours, reference = build_pair(arch, DictionaryTask(SRC, TGT), **overrides)
    return ours.eval(), reference.eval()


@pytest.fixture(scope="module", params=sorted(CONFIGS) + ["no_positions"])
def model(request):
    arch, overrides = NO_POSITIONS if request.param == "no_positions" else CONFIGS[request.param]
    torch.manual_seed(1)
    return build_plugin_model(arch, DictionaryTask(SRC, TGT), **overrides).eval()


@pytest.fixture(params=[True, False], ids=["compiled", "python"])
def compiled(request):
    return request.param


def test_explicit_steps_give_the_decoders_own_bits(model, compiled):
    explicit = _decode(model, DecoderSteps(model, compiled), SRC, TGT)
    protocol = _decode(model, FairseqIncrementalSteps(model.returning_attention()), SRC, TGT)
    for (lprobs, attention), (expected, expected_attention) in zip(explicit, protocol):
        assert torch.equal(lprobs, expected)
        assert torch.equal(attention, expected_attention)


def test_beam_searchs_reordering_gives_the_bits_of_reordering_row_by_row(model, compiled):
    """reorder_within_sentences (the shared source follows the sentences kept, without reading
    the order) against fairseq's protocol reordering every row: the same bits at every step."""
    explicit = _decode(model, DecoderSteps(model, compiled), SRC, TGT, within_sentences=True)
    protocol = _decode(model, FairseqIncrementalSteps(model.returning_attention()), SRC, TGT, within_sentences=True)
    for (lprobs, attention), (expected, expected_attention) in zip(explicit, protocol):
        assert torch.equal(lprobs, expected)
        assert torch.equal(attention, expected_attention)


def test_beam_searchs_reordering_leaves_a_shared_source_alone_until_a_sentence_leaves():
    torch.manual_seed(1)
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT)).eval()
    model.set_beam_size(BEAM)
    src, lengths, _, _ = translation_batch(SRC, TGT, SOURCE_LENGTHS, [1] * len(SOURCE_LENGTHS), seed=3)
    rows = len(SOURCE_LENGTHS) * BEAM
    with torch.no_grad():
        encoder_out = model.encoder(src, lengths)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, torch.arange(len(SOURCE_LENGTHS)).repeat_interleave(BEAM))
        state = DecoderSteps(model).start(encoder_out)
    (within, _), _, (first_leaves, kept) = _search_orders(rows)
    shared = state.source
    assert shared.copies == BEAM and shared.keys.size(0) == len(SOURCE_LENGTHS)
    state = DecoderSteps.reorder_within_sentences(state, within, None)
    assert state.source is shared
    state = DecoderSteps.reorder_within_sentences(state, first_leaves, kept)
    assert state.source.copies == BEAM and torch.equal(state.source.keys, shared.keys[1:])


def test_explicit_steps_match_fairseqs_fconv(pair, compiled):
    model, reference = pair
    explicit = _decode(model, DecoderSteps(model, compiled), SRC, TGT, attention=False)
    fairseqs = _decode(reference, FairseqIncrementalSteps(reference), SRC, TGT, attention=False)
    for (lprobs, attention), (expected, _) in zip(explicit, fairseqs):
        assert attention is None
        assert relative_error(lprobs, expected) < 1e-5


def test_prepared_for_generation_the_bits_stay_the_decoders(compiled):
    torch.manual_seed(2)
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT)).eval()
    model.make_generation_fast_()  # the weights frozen in the layout generation reads
    explicit = _decode(model, DecoderSteps(model, compiled), SRC, TGT)
    protocol = _decode(model, FairseqIncrementalSteps(model.returning_attention()), SRC, TGT)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(explicit, protocol))


@pytest.mark.parametrize("copying", [False, True], ids=["translation", "copying"])
def test_int8_steps_give_the_int8_decoders_bits(copying, compiled):
    torch.manual_seed(4)
    if copying:
        model = build_plugin_model("fconv_gigaword_copy", DictionaryTask(JOINED, JOINED), encoder_layers="[(32, 3)] * 2",
                                   decoder_layers="[(32, 3), (48, 3, 0), (32, 2)]", decoder_attention="[True, False, True]",
                                   encoder_embed_dim=24, decoder_embed_dim=24, decoder_out_embed_dim=16)
        dictionaries = (JOINED, JOINED)
    else:
        model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT))
        dictionaries = (SRC, TGT)
    model.eval().quantize_int8_()
    explicit = _decode(model, DecoderSteps(model, compiled), *dictionaries)
    protocol = _decode(model, FairseqIncrementalSteps(model.returning_attention()), *dictionaries)
    for (lprobs, attention), (expected, expected_attention) in zip(explicit, protocol):
        assert torch.equal(lprobs, expected)
        assert torch.equal(attention, expected_attention)


def test_copying_steps_give_the_copying_decoders_bits():
    torch.manual_seed(6)
    model = build_plugin_model("fconv_gigaword_copy", DictionaryTask(JOINED, JOINED), encoder_layers="[(32, 3)] * 2",
                               decoder_layers="[(32, 3), (32, 2)]", encoder_embed_dim=24, decoder_embed_dim=24,
                               decoder_out_embed_dim=16).eval()
    with torch.no_grad():
        model.decoder.pointer_generator.gate.bias.fill_(0.3)  # both parts of the mixture matter
    for attention in (False, True):
        explicit = _decode(model, DecoderSteps(model), JOINED, JOINED, attention)
        protocol = _decode(model, FairseqIncrementalSteps(model.returning_attention()), JOINED, JOINED, attention)
        for (lprobs, weights), (expected, expected_weights) in zip(explicit, protocol):
            assert torch.equal(lprobs, expected)
            assert (weights is None) == (not attention)
            if attention:
                assert torch.equal(weights, expected_weights)


def _runs_compiled(model) -> bool:
    with torch.no_grad():
        src, lengths, _, _ = translation_batch(SRC, TGT, SOURCE_LENGTHS, [1] * len(SOURCE_LENGTHS), seed=3)
        return DecoderSteps(model).start(model.encoder(src, lengths)).compiled is not None


@needs_compiled("decoder_step")
def test_the_compiled_step_runs_the_decoders_it_knows():
    """The step is compiled for float32 and int8 translation models, with and without
    residual projections or position embeddings; a shared output embedding (a plain
    nn.Linear) and ``compiled=False`` keep the Python step, as copying models do (below)."""
    task = DictionaryTask(SRC, TGT)
    for name in ("iwslt", "wmt_en_de"):
        arch, overrides = CONFIGS[name]
        assert _runs_compiled(build_plugin_model(arch, task, **overrides).eval()), name
    assert _runs_compiled(build_plugin_model(*NO_POSITIONS[:1], task, **NO_POSITIONS[1]).eval())
    int8 = build_plugin_model("fconv_iwslt_de_en", task).eval()
    int8.quantize_int8_()
    assert _runs_compiled(int8)
    arch, overrides = CONFIGS["odd"]
    assert not _runs_compiled(build_plugin_model(arch, task, **overrides).eval())
    model = build_plugin_model("fconv_iwslt_de_en", task).eval()
    src, lengths, _, _ = translation_batch(SRC, TGT, SOURCE_LENGTHS, [1] * len(SOURCE_LENGTHS), seed=3)
    with torch.no_grad():
        assert DecoderSteps(model, compiled=False).start(model.encoder(src, lengths)).compiled is None


def test_a_copying_model_keeps_the_python_step():
    model = build_plugin_model("fconv_gigaword_copy", DictionaryTask(JOINED, JOINED), encoder_layers="[(32, 3)] * 2",
                               decoder_layers="[(32, 3), (32, 2)]", encoder_embed_dim=24, decoder_embed_dim=24,
                               decoder_out_embed_dim=16).eval()
    src, lengths, _, _ = translation_batch(JOINED, JOINED, SOURCE_LENGTHS, [1] * len(SOURCE_LENGTHS), seed=3)
    with torch.no_grad():
        assert DecoderSteps(model).start(model.encoder(src, lengths)).compiled is None


def test_a_decoder_in_training_mode_is_refused():
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT)).train()
    with pytest.raises(FConvError, match="training mode .*model.eval\\(\\)"):
        _decode(model, DecoderSteps(model), SRC, TGT)


def test_only_the_plugins_decoder_is_stepped_explicitly(pair):
    model, reference = pair
    assert DecoderSteps.supports(model) and not DecoderSteps.supports(reference)


def test_embeddings_the_compiled_step_does_not_know_keep_the_python_step():
    """A plain nn.Embedding in the token embedding's place (the compiled step looks up only
    the plugin's float32 and int8 tables): the Python step, with the decoder's own bits."""
    torch.manual_seed(1)
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT)).eval()
    plain = torch.nn.Embedding(len(TGT), model.decoder.embed_tokens.embedding_dim, padding_idx=TGT.pad())
    plain.weight = model.decoder.embed_tokens.weight
    model.decoder.embed_tokens = plain
    assert not _runs_compiled(model)
    explicit = _decode(model, DecoderSteps(model), SRC, TGT)
    protocol = _decode(model, FairseqIncrementalSteps(model.returning_attention()), SRC, TGT)
    for (lprobs, attention), (expected, expected_attention) in zip(explicit, protocol):
        assert torch.equal(lprobs, expected)
        assert torch.equal(attention, expected_attention)


@needs_compiled("decoder_step")
@pytest.mark.parametrize("int8", [False, True], ids=["float32", "int8"])
def test_reorderings_between_two_steps_compose_as_the_python_steps_do(int8):
    """Two reorderings before a step (the compiled decoding takes them when it builds the
    windows): the Python step's bits, which reorders at once."""
    torch.manual_seed(1)
    model = build_plugin_model("fconv_iwslt_de_en", DictionaryTask(SRC, TGT)).eval()
    if int8:
        model.quantize_int8_()
    src, lengths, _, _ = translation_batch(SRC, TGT, SOURCE_LENGTHS, [1] * len(SOURCE_LENGTHS), seed=3)
    rows = len(SOURCE_LENGTHS) * BEAM
    generator = torch.Generator().manual_seed(4)
    tokens = torch.randint(TGT.nspecial, len(TGT), (rows, 3), generator=generator)
    tokens[:, 0] = TGT.eos()
    first, second = torch.randperm(rows, generator=generator), torch.randperm(rows, generator=generator)
    results = []
    for compiled in (True, False):
        steps = DecoderSteps(model, compiled)
        with torch.no_grad():
            encoder_out = model.encoder(src, lengths)
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, torch.arange(len(SOURCE_LENGTHS)).repeat_interleave(BEAM))
            state = steps.start(encoder_out)
            steps.log_probs(state, tokens[:, :1], False)
            steps.log_probs(state, tokens[:, :2], False)
            state = steps.reorder(steps.reorder(state, first), second)
            results.append(steps.log_probs(state, tokens[first][second][:, :3], True))
    assert _runs_compiled(model)
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
