"""Mixed precision (``FConvModel.compute_in_(torch.bfloat16)``): bfloat16 products, float32
weights, against fairseq's built-in fconv in float32 with the same weights.

bfloat16 keeps 8 significant bits (a unit roundoff of 2⁻⁸ ≈ 0.4%); a step's loss, a sum of
many per-token losses, then stays within about 1% of float32's, and each parameter's
gradient within a few percent. These tests need no bfloat16 units: torch computes
bfloat16 on any CPU, only slowly where the units are missing (tiny models here)."""

import copy

import pytest
import torch
import torch.nn.functional as F

from fconv_plugin import backend
from fconv_plugin.errors import FConvError
from tests.support import (
    DictionaryTask,
    build_pair,
    build_plugin_model,
    decode_step_by_step,
    make_dictionary,
    relative_error,
    translation_batch,
)

SRC_DICT = make_dictionary(40, "s")
TGT_DICT = make_dictionary(36, "t")
TASK = DictionaryTask(SRC_DICT, TGT_DICT)
JOINED = make_dictionary(40, "w")
JOINED_TASK = DictionaryTask(JOINED, JOINED)
SMALL = {"encoder_layers": "[(64, 3)] * 3", "decoder_layers": "[(64, 3)] * 3", "encoder_embed_dim": 48,
         "decoder_embed_dim": 48, "decoder_out_embed_dim": 32, "dropout": 0.0}
CONFIGS = {
    "plain": ("fconv", SMALL, TASK),
    "shared output embedding": ("fconv", {**SMALL, "decoder_out_embed_dim": 48, "share_input_output_embed": True}, TASK),
    "copying": ("fconv_gigaword_copy", SMALL, JOINED_TASK),
}
LOSS_TOLERANCE = 0.005  # relative; measured: at most 0.03% (bfloat16 rounds each product to 0.4%)
GRADIENT_TOLERANCE = 0.05  # relative to the largest gradient entry, per parameter; measured: at most 2.4%


def _batch(task):
    return translation_batch(task.source_dictionary, task.target_dictionary,
                             src_lengths=[7, 4, 9, 6], tgt_lengths=[5, 8, 3, 6], seed=3)


def _loss(model, batch):
    """The summed token cross-entropy as fairseq's criterion computes it: log-softmax of the
    output in float32 (``get_normalized_probs``), padding ignored."""
    src, lengths, prev, target = batch
    out = model(src, lengths, prev)
    lprobs = model.get_normalized_probs(out, log_probs=True)
    assert lprobs.dtype == torch.float32
    return F.nll_loss(lprobs.view(-1, lprobs.size(-1)), target.view(-1), ignore_index=1, reduction="sum")


@pytest.fixture(params=sorted(CONFIGS))
def models(request):
    """(the plugin's model in mixed precision, the float32 reference with the same weights, task):
    fairseq's fconv, or for the copying model, which fairseq's fconv lacks, the plugin's own
    float32 form (tested against a float64 recomputation in test_pointer_generator_model)."""
    arch, overrides, task = CONFIGS[request.param]
    torch.manual_seed(1)
    if arch == "fconv_gigaword_copy":
        ours = build_plugin_model(arch, task, **overrides)
        reference = copy.deepcopy(ours)
    else:
        ours, reference = build_pair(arch, task, **overrides)
    return ours.compute_in_(torch.bfloat16), reference, task


def test_a_bfloat16_step_gives_float32s_loss_and_gradients_within_bfloat16s_tolerance(models):
    ours, reference, task = models
    ours.train(), reference.train()
    batch = _batch(task)
    our_loss, reference_loss = _loss(ours, batch), _loss(reference, batch)
    our_loss.backward(), reference_loss.backward()
    assert abs(our_loss.item() - reference_loss.item()) / reference_loss.item() < LOSS_TOLERANCE
    theirs = dict(reference.named_parameters())
    for name, parameter in ours.named_parameters():
        assert parameter.dtype == torch.float32 and parameter.grad.dtype == torch.float32, name  # master weights
        expected = theirs[name].grad
        if expected.abs().max() == 0:
            continue  # rows of unused embeddings get no gradient
        assert relative_error(parameter.grad, expected) < GRADIENT_TOLERANCE, name


def test_the_products_run_in_bfloat16_and_the_softmax_in_float32(models):
    ours, _, task = models
    seen = {}

    def record(name):
        def hook(module, inputs, output):
            seen[name] = (inputs[0].dtype, output.dtype)

        return hook

    ours.decoder.fc2.register_forward_hook(record("fc2"))
    ours.decoder.convolutions[0].register_forward_hook(record("decoder convolution"))
    details = {}
    src, lengths, prev, _ = _batch(task)
    ours(src, lengths, prev, details=details)
    assert seen == {"fc2": (torch.bfloat16, torch.bfloat16), "decoder convolution": (torch.bfloat16, torch.bfloat16)}
    for weights in details["attention"]:  # each a softmax over the source, taken in float32
        assert torch.allclose(weights.float().sum(-1), torch.ones(weights.shape[:-1]), atol=1e-2)
    assert {p.dtype for p in ours.parameters()} == {torch.float32}


def test_step_by_step_decoding_follows_the_full_sequence_in_bfloat16(models):
    """Validation's BLEU during training decodes incrementally with the training model."""
    ours, _, task = models
    ours.eval()
    src, lengths, prev, _ = _batch(task)
    with torch.no_grad():
        full = ours.get_normalized_probs(ours(src, lengths, prev), log_probs=True)
        steps = [ours.get_normalized_probs(step, log_probs=True) for step in decode_step_by_step(ours, src, lengths, prev)]
    assert relative_error(torch.cat(steps, dim=1), full) < 0.02


def test_float32_again_gives_exactly_the_float32_model():
    torch.manual_seed(1)
    ours, _ = build_pair("fconv", TASK, **SMALL)
    ours.eval()
    batch = _batch(TASK)
    with torch.no_grad():
        before = ours(*batch[:3])[0]
        ours.compute_in_(torch.bfloat16)
        mixed = ours(*batch[:3])[0]
        ours.compute_in_(torch.float32)
        after = ours(*batch[:3])[0]
    assert mixed.dtype == torch.bfloat16 and after.dtype == torch.float32
    assert torch.equal(before, after)


def test_training_draws_dropout_as_the_backend_chooses_and_float32_again_draws_fairseqs_masks():
    """bfloat16 takes backend.training_dropout's draws (or those asked for); the same seed gives the same
    masks; float32 again gives fairseq's masks, so a seeded training step equals fairseq's fconv's."""
    torch.manual_seed(1)
    ours, reference = build_pair("fconv", TASK, **{**SMALL, "dropout": 0.3})
    ours.train(), reference.train()
    batch = _batch(TASK)

    def forward(model, seed):
        torch.manual_seed(seed)
        return model(*batch[:3])[0].detach().float()

    draws = lambda model: {module.draws for module in model.modules() if hasattr(module, "draws")}  # noqa: E731
    assert draws(ours.compute_in_(torch.bfloat16)) == {backend.training_dropout(torch.bfloat16)}
    sixteen_bit = ours.compute_in_(torch.bfloat16, backend.SIXTEEN_BIT_DRAWS)
    first, again = forward(sixteen_bit, 7), forward(sixteen_bit, 7)
    assert torch.equal(first, again)
    torchs = forward(ours.compute_in_(torch.bfloat16, backend.TORCH_DRAWS), 7)
    assert not torch.equal(first, torchs)  # other masks: the draws asked for are the ones drawn
    ours.compute_in_(torch.float32, backend.SIXTEEN_BIT_DRAWS)
    assert draws(ours) == {backend.SIXTEEN_BIT_DRAWS}
    ours.compute_in_(torch.float32)
    assert draws(ours) == {backend.TORCH_DRAWS}
    assert torch.allclose(forward(ours, 7), forward(reference, 7), rtol=1e-5, atol=1e-6)
    with pytest.raises(FConvError, match="^dropout draws are one of .*, not 'fast'$"):
        ours.compute_in_(torch.bfloat16, "fast")


def test_30_bfloat16_updates_lower_the_loss_as_float32s_do():
    """The same model, data and Adam updates in float32 and in mixed precision: both learn,
    and after 30 updates their losses agree within a few percent."""
    torch.manual_seed(1)
    float32, _ = build_pair("fconv", TASK, **SMALL)
    mixed = copy.deepcopy(float32).compute_in_(torch.bfloat16)
    batches = [translation_batch(SRC_DICT, TGT_DICT, src_lengths=[6, 8, 5, 7], tgt_lengths=[6, 8, 5, 7], seed=s)
               for s in range(4)]
    curves = {}
    for name, model in (("float32", float32), ("bfloat16", mixed)):
        model.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        losses = []
        for update in range(30):
            optimizer.zero_grad()
            loss = _loss(model, batches[update % len(batches)])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        curves[name] = losses
    for losses in curves.values():
        assert sum(losses[-4:]) < 0.5 * sum(losses[:4])
    assert abs(sum(curves["bfloat16"][-4:]) - sum(curves["float32"][-4:])) / sum(curves["float32"][-4:]) < 0.05


def test_mixed_precision_takes_bfloat16_or_float32_and_no_int8_model():
    torch.manual_seed(1)
    ours, _ = build_pair("fconv", TASK, **SMALL)
    with pytest.raises(FConvError, match="float32 or in mixed precision with bfloat16, not torch.float16"):
        ours.compute_in_(torch.float16)
    ours.quantize_int8_()
    with pytest.raises(FConvError, match=r"^an int8 model \(fconv-quantize\) computes in int8 and float32"):
        ours.compute_in_(torch.bfloat16)
