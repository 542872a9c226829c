"""The copying decoder (--pointer-generator) as a whole.

The reference is fairseq's built-in fconv with the same weights (it has no copy
mechanism): its logits, attention, encoder outputs and decoder states, mixed in
float64 by the formula of See et al. (2017).
"""

import copy
import math

import pytest
import torch
from fairseq.models import fconv as reference_fconv
from fairseq.sequence_generator import SequenceGenerator

from fconv_plugin.errors import FConvError
from fconv_plugin.models import FConvModel
from tests.support import (
    DictionaryTask,
    build_plugin_model,
    decode_step_by_step,
    make_dictionary,
    model_args,
    relative_error,
    translation_batch,
)

JOINED = make_dictionary(40, "w")
TASK = DictionaryTask(JOINED, JOINED)
SMALL = {
    "encoder_layers": "[(32, 3)] * 3", "decoder_layers": "[(32, 3), (48, 3, 0), (32, 2)]",
    "decoder_attention": "[True, False, True]",
    "encoder_embed_dim": 24, "decoder_embed_dim": 24, "decoder_out_embed_dim": 16,
}


def _copy_model(seed=1, **overrides):
    torch.manual_seed(seed)
    model = build_plugin_model("fconv_gigaword_copy", TASK, **{**SMALL, **overrides})
    with torch.no_grad():  # a gate far from 0 or 1, so both parts of the mixture matter
        model.decoder.pointer_generator.gate.bias.fill_(0.3)
    return model.eval()


def _batch(seed=3):
    return translation_batch(JOINED, JOINED, src_lengths=[7, 4, 9], tgt_lengths=[5, 8, 3], seed=seed)


def _reference_with_same_weights(model):
    """fairseq's fconv with every weight the copying model has but the gate's."""
    args = model_args("fconv_gigaword", **SMALL)
    reference = reference_fconv.FConvModel.build_model(copy.deepcopy(args), TASK)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("decoder.pointer_generator.")}
    reference.load_state_dict(state, strict=True)
    return reference.eval()


def test_output_is_the_float64_mixture_of_fairseqs_softmax_and_attention():
    model = _copy_model()
    reference = _reference_with_same_weights(model)
    src, lengths, prev, _ = _batch()
    captured = {}
    hook = reference.decoder.fc2.register_forward_hook(lambda _m, _i, out: captured.__setitem__("state", out))
    with torch.no_grad():
        log_probs, _ = model(src, lengths, prev)
        encoder_out = reference.encoder(src, lengths)
        logits, attention = reference.decoder(prev, encoder_out)
        g = (reference.decoder.embed_tokens(prev) + reference.decoder.embed_positions(prev)).double()
    hook.remove()
    attention = attention * len(reference.decoder.attention) / 2  # fairseq divides by all 3 layers, 2 attend

    _, values = (t.double() for t in encoder_out["encoder_out"])
    h, logits, attention = captured["state"].double(), logits.double(), attention.double()
    gate = model.decoder.pointer_generator.gate
    w, b = gate.normalized_weight().double().view(-1), float(gate.bias)
    pad = JOINED.pad()
    for row in range(src.size(0)):
        real = src[row].ne(pad).nonzero().view(-1)
        s = len(real)
        for t in range(prev.size(1)):
            a = attention[row, t, real]
            c = sum(a[n] * values[row, j] for n, j in enumerate(real)) * s * math.sqrt(1.0 / s)
            p_gen = torch.sigmoid(torch.cat([h[row, t], c, g[row, t]]) @ w + b)
            expected = p_gen * torch.softmax(logits[row, t], dim=-1)
            for n, j in enumerate(real):
                expected[src[row, j]] += (1 - p_gen) * a[n]
            assert relative_error(log_probs[row, t].exp().double(), expected) < 1e-5
            assert 0.05 < float(p_gen) < 0.95


def test_without_the_option_the_model_is_fairseqs_fconv_gigaword():
    torch.manual_seed(1)
    plain = build_plugin_model("fconv_gigaword", TASK, **SMALL)
    reference = reference_fconv.FConvModel.build_model(model_args("fconv_gigaword", **SMALL), TASK)
    assert {k: v.shape for k, v in plain.state_dict().items()} == {k: v.shape for k, v in reference.state_dict().items()}
    assert plain.decoder.pointer_generator is None
    assert "src_tokens" not in plain.encoder(*_batch()[:2])


def test_incremental_decoding_gives_the_full_sequence_scores():
    model = _copy_model()
    src, lengths, prev, _ = _batch()
    prev = prev.clone()
    prev[prev.eq(JOINED.pad())] = JOINED.index("w1")  # decoding never feeds padding
    with torch.no_grad():
        full, _ = model(src, lengths, prev)
    steps = torch.cat([log_probs for log_probs, _ in decode_step_by_step(model, src, lengths, prev)], dim=1)
    assert relative_error(steps, full) < 1e-5


@pytest.mark.parametrize("generation_fast", [False, True])
def test_beam_search_scores_equal_teacher_forced_scores(generation_fast):
    """What SequenceGenerator reports for each hypothesis is the full forward's log-probability."""
    model = _copy_model()
    if generation_fast:  # one attention source per sentence, source tokens repeated per hypothesis
        model.make_generation_fast_(beamable_mm_beam_size=5, need_attn=False)
    src, lengths, _, _ = _batch()
    generator = SequenceGenerator([model], JOINED, beam_size=5, max_len_b=10)
    with torch.no_grad():
        hypotheses = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
        for row, sentence in enumerate(hypotheses):
            assert len(sentence) == 5
            for hypo in sentence:
                tokens = hypo["tokens"].unsqueeze(0)
                prev = torch.cat([tokens.new_tensor([[JOINED.eos()]]), tokens[:, :-1]], dim=1)
                log_probs = model.get_normalized_probs(model(src[row : row + 1], lengths[row : row + 1], prev), log_probs=True)
                expected = log_probs[0].gather(1, tokens[0].unsqueeze(1)).view(-1)
                assert relative_error(hypo["positional_scores"], expected) < 1e-4


def test_the_model_can_copy_a_word_it_never_generates():
    """A word whose output row is pushed to -inf-like logits still comes out by copying."""
    model = _copy_model()
    word = JOINED.index("w7")
    with torch.no_grad():
        model.decoder.fc3.bias[word] = -1e4
        model.decoder.pointer_generator.gate.bias.fill_(-20.0)  # p_gen ≈ 0: copy only
    src = torch.tensor([[word, word, word, JOINED.eos()]])
    prev = torch.tensor([[JOINED.eos()]])
    with torch.no_grad():
        probs = model.get_normalized_probs(model(src, torch.tensor([4]), prev), log_probs=False)[0, 0]
    assert float(probs[word]) > 0.5  # three of the four source positions hold it
    assert abs(float(probs.sum()) - 1.0) < 1e-5


def test_int8_keeps_the_copying_model_close():
    model = _copy_model()
    src, lengths, prev, _ = _batch()
    with torch.no_grad():
        float_probs = model.get_normalized_probs(model(src, lengths, prev), log_probs=False)
        model.quantize_int8_()
        int8_probs = model.get_normalized_probs(model(src, lengths, prev), log_probs=False)
    assert model.decoder.pointer_generator.gate.int8 is not None
    assert float((int8_probs - float_probs).abs().max()) < 0.02


def test_separate_dictionaries_are_refused_with_a_clear_error():
    task = DictionaryTask(make_dictionary(40, "s"), make_dictionary(36, "t"))
    with pytest.raises(FConvError, match="--joined-dictionary"):
        FConvModel.build_model(model_args("fconv_gigaword_copy", **SMALL), task)
