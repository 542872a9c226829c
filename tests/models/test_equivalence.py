"""The plugin's model against fairseq's built-in FConvModel with the same weights."""

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from tests.support import (
    DictionaryTask,
    build_pair,
    decode_step_by_step,
    make_dictionary,
    relative_error,
    translation_batch,
)

TOLERANCE = 1e-5

SRC_DICT = make_dictionary(40, "s")
TGT_DICT = make_dictionary(36, "t")
TASK = DictionaryTask(SRC_DICT, TGT_DICT)

CONFIGS = {
    "iwslt": ("fconv_iwslt_de_en", {}),
    "wmt_en_de": ("fconv_wmt_en_de", {}),
    "fconv_small": ("fconv", {"encoder_layers": "[(64, 3)] * 5", "decoder_layers": "[(64, 3)] * 5", "encoder_embed_dim": 48, "decoder_embed_dim": 48, "decoder_out_embed_dim": 32}),
    "odd": ("fconv", {
        "encoder_layers": "[(64, 2)] * 2 + [(96, 4, 2), (96, 3, 0)]",
        "decoder_layers": "[(64, 3, 0), (80, 3), (80, 1, 2), (64, 2)]",
        "decoder_attention": "[True, False, True, False]",
        "encoder_embed_dim": 48, "decoder_embed_dim": 48, "decoder_out_embed_dim": 48,
        "share_input_output_embed": True,
    }),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pair(request):
    arch, overrides = CONFIGS[request.param]
    torch.manual_seed(1)
    ours, reference = build_pair(arch, TASK, **overrides)
    return ours, reference


def _batch():
    return translation_batch(SRC_DICT, TGT_DICT, src_lengths=[7, 4, 9], tgt_lengths=[5, 8, 3], seed=3)


def _fairseq_attention_as_true_average(reference, attention):
    """fairseq divides the summed attention by all layers; the plugin by attention layers."""
    layers = len(reference.decoder.attention)
    with_attention = sum(layer is not None for layer in reference.decoder.attention)
    return attention * layers / with_attention


def test_teacher_forced_logits_and_attention_match(pair):
    ours, reference = pair
    ours.eval(), reference.eval()
    src, lengths, prev, _ = _batch()
    with torch.no_grad():
        our_logits, our_attention = ours(src, lengths, prev)
        ref_logits, ref_attention = reference(src, lengths, prev)
    assert relative_error(our_logits, ref_logits) < TOLERANCE
    expected_attention = _fairseq_attention_as_true_average(reference, ref_attention)
    assert relative_error(our_attention, expected_attention) < TOLERANCE
    # each row of an average of distributions is a distribution over the real source words
    assert torch.allclose(our_attention.sum(-1), torch.ones_like(our_attention.sum(-1)), atol=1e-5)


def test_a_recorded_reordering_reads_as_fairseqs_reordered_encoder_output(pair):
    """reorder_encoder_out keeps an index instead of copying (fairseq reorders at every
    step); applied, two reorderings in a row give fairseq's reordered tensors."""
    from fconv_plugin.models.fconv import encoder_rows

    ours, reference = pair
    ours.eval(), reference.eval()
    src, lengths, _, _ = _batch()
    expand, then = torch.tensor([0, 0, 1, 1, 2, 2]), torch.tensor([5, 4, 1, 1])
    with torch.no_grad():
        recorded = ours.encoder.reorder_encoder_out(ours.encoder.reorder_encoder_out(ours.encoder(src, lengths), expand), then)
        expected = reference.encoder.reorder_encoder_out(
            reference.encoder.reorder_encoder_out(reference.encoder(src, lengths), expand), then)
    assert recorded["rows"].tolist() == [2, 2, 0, 0]
    applied = encoder_rows(recorded)
    for ours_part, reference_part in zip(applied["encoder_out"], expected["encoder_out"]):
        assert relative_error(ours_part, reference_part) < TOLERANCE
    assert torch.equal(applied["encoder_padding_mask"], expected["encoder_padding_mask"])


def test_unpadded_batches_match_too(pair):
    """Sources of one length: no padding mask in the encoder or the attention."""
    ours, reference = pair
    ours.eval(), reference.eval()
    src, lengths, prev, _ = translation_batch(SRC_DICT, TGT_DICT, src_lengths=[6, 6, 6], tgt_lengths=[5, 5, 5], seed=4)
    with torch.no_grad():
        assert ours.encoder(src, lengths)["encoder_padding_mask"] is None
        our_logits, our_attention = ours(src, lengths, prev)
        ref_logits, ref_attention = reference(src, lengths, prev)
    assert relative_error(our_logits, ref_logits) < TOLERANCE
    assert relative_error(our_attention, _fairseq_attention_as_true_average(reference, ref_attention)) < TOLERANCE
    _assert_identical_beam_search(ours, reference, batch=(src, lengths, prev, None))


def test_incremental_decoding_equals_full_forward(pair):
    ours, _ = pair
    ours.eval()
    src, lengths, prev, _ = _batch()
    prev = prev.clone()
    prev[prev.eq(TGT_DICT.pad())] = TGT_DICT.index("t1")  # decoding never feeds padding
    with torch.no_grad():
        full_logits, full_attention = ours(src, lengths, prev)
    steps = decode_step_by_step(ours, src, lengths, prev)
    step_logits = torch.cat([logits for logits, _ in steps], dim=1)
    step_attention = torch.cat([attention for _, attention in steps], dim=1)
    assert relative_error(step_logits, full_logits) < TOLERANCE
    assert relative_error(step_attention, full_attention) < TOLERANCE


def test_beam_search_gives_identical_hypotheses_and_scores(pair):
    _assert_identical_beam_search(*pair)


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_beam_search_after_make_generation_fast_as_fairseq_generate_does(config):
    """The inference-only path (cached weights, transposed GEMMs) against fairseq's."""
    arch, overrides = CONFIGS[config]
    torch.manual_seed(1)
    ours, reference = build_pair(arch, TASK, **overrides)
    for model in (ours, reference):
        model.eval()
        model.make_generation_fast_(beamable_mm_beam_size=5, need_attn=False)
    _assert_identical_beam_search(ours, reference)


def _assert_identical_beam_search(ours, reference, batch=None):
    src, lengths, _, _ = batch or _batch()
    results = []
    for model in (ours, reference):
        model.eval()
        generator = SequenceGenerator([model], TGT_DICT, beam_size=5, max_len_b=12)
        with torch.no_grad():
            results.append(generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}}))
    ours_hypos, reference_hypos = results
    for our_sentence, reference_sentence in zip(ours_hypos, reference_hypos):
        assert len(our_sentence) == len(reference_sentence) == 5
        for our_hypo, reference_hypo in zip(our_sentence, reference_sentence):
            assert torch.equal(our_hypo["tokens"], reference_hypo["tokens"])
            assert abs(float(our_hypo["score"] - reference_hypo["score"])) < TOLERANCE
            assert relative_error(our_hypo["positional_scores"], reference_hypo["positional_scores"]) < TOLERANCE


def test_one_backward_pass_gives_the_same_gradients(pair):
    ours, reference = pair
    src, lengths, prev, target = _batch()
    for model in (ours, reference):
        model.train()
        model.zero_grad()
        logits, _ = model(src, lengths, prev)
        loss = torch.nn.functional.cross_entropy(
            logits.view(-1, logits.size(-1)), target.view(-1), ignore_index=TGT_DICT.pad(), reduction="sum"
        )
        loss.backward()
    reference_grads = dict(reference.named_parameters())
    worst = 0.0
    for name, parameter in ours.named_parameters():
        expected = reference_grads[name].grad
        assert parameter.grad is not None, name
        worst = max(worst, relative_error(parameter.grad, expected))
        assert relative_error(parameter.grad, expected) < TOLERANCE, name
    print(f"largest relative gradient error: {worst:.2e}")


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_training_mode_with_dropout_draws_the_same_masks_as_fairseq(config):
    """Same seed, same dropout masks in the same order: seeded training runs match fairseq's."""
    arch, overrides = CONFIGS[config]
    torch.manual_seed(1)
    ours, reference = build_pair(arch, TASK, **{**overrides, "dropout": 0.1})
    src, lengths, prev, _ = _batch()
    logits = []
    for model in (ours, reference):
        model.train()
        torch.manual_seed(5)
        logits.append(model(src, lengths, prev)[0])
    assert relative_error(*logits) < TOLERANCE


def _copies_seen_by_attention(model, run):
    """How many decoder rows share each attention source row, at every attention call."""
    layer = next(layer for layer in model.decoder.attention if layer is not None)
    seen = []
    handle = layer.register_forward_hook(lambda module, inputs, output: seen.append(inputs[2].copies))
    try:
        run()
    finally:
        handle.remove()
    return seen


@pytest.mark.parametrize("no_beamable_mm", [False, True])
def test_beam_search_keeps_one_attention_source_per_sentence(no_beamable_mm):
    """fairseq's generator names the beam; --no-beamable-mm keeps one copy per hypothesis."""
    arch, overrides = CONFIGS["odd"]
    torch.manual_seed(1)
    ours, reference = build_pair(arch, TASK, **overrides)
    ours.eval()
    ours.make_generation_fast_(beamable_mm_beam_size=None if no_beamable_mm else 5, need_attn=False)
    seen = _copies_seen_by_attention(ours, lambda: _assert_identical_beam_search(ours, reference))
    assert seen and set(seen) == ({1} if no_beamable_mm else {5})
