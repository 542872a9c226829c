"""The model after make_generation_fast_: reloaded, trained again, against fairseq's fconv."""

import torch

from tests.support import DictionaryTask, build_pair, make_dictionary, relative_error, translation_batch

SRC_DICT = make_dictionary(30, "s")
TGT_DICT = make_dictionary(26, "t")
TASK = DictionaryTask(SRC_DICT, TGT_DICT)
SMALL = {"encoder_layers": "[(32, 3)] * 3", "decoder_layers": "[(32, 3)] * 3",
         "encoder_embed_dim": 24, "decoder_embed_dim": 24, "decoder_out_embed_dim": 16}


def _logits(model, batch):
    src, lengths, prev, _ = batch
    model.eval()
    with torch.no_grad():
        return model(src, lengths, prev)[0]


def _perturbed(state_dict, seed):
    generator = torch.Generator().manual_seed(seed)
    return {name: value + 0.05 * torch.randn(value.shape, generator=generator) if value.is_floating_point() else value
            for name, value in state_dict.items()}


def test_loading_another_state_dict_after_make_generation_fast_gives_that_models_outputs():
    torch.manual_seed(0)
    ours, reference = build_pair("fconv", TASK, **SMALL)
    ours.make_generation_fast_()
    other = _perturbed(reference.state_dict(), seed=1)
    ours.load_state_dict(other)
    reference.load_state_dict(other)
    batch = translation_batch(SRC_DICT, TGT_DICT, src_lengths=[6, 3], tgt_lengths=[4, 5], seed=2)
    assert relative_error(_logits(ours, batch), _logits(reference, batch)) < 1e-5


def test_training_after_make_generation_fast_then_generating_uses_the_trained_weights():
    torch.manual_seed(0)
    ours, reference = build_pair("fconv", TASK, **SMALL)
    batch = translation_batch(SRC_DICT, TGT_DICT, src_lengths=[6, 3], tgt_lengths=[4, 5], seed=2)
    _logits(ours, batch)
    ours.make_generation_fast_()
    # fairseq's make_generation_fast_ forbids model.train(); fine-tuning the modules is still possible
    torch.nn.Module.train(ours, True)
    src, lengths, prev, target = batch
    optimizer = torch.optim.SGD(ours.parameters(), lr=0.5)
    for _ in range(2):
        optimizer.zero_grad()
        logits, _ = ours(src, lengths, prev)
        torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1),
                                          ignore_index=TGT_DICT.pad()).backward()
        optimizer.step()
    reference.load_state_dict(ours.state_dict())
    assert relative_error(_logits(ours, batch), _logits(reference, batch)) < 1e-5
