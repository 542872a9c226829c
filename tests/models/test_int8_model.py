"""A model with int8 weights: built from options, loaded from a state dict, close to float32."""

import copy

import pytest
import torch

from fconv_plugin.modules.embeddings import TokenEmbedding
from fconv_plugin.deployment.int8 import Int8Embedding
from tests.support import DictionaryTask, build_pair, build_plugin_model, make_dictionary, relative_error, translation_batch

SRC, TGT = make_dictionary(40, "s"), make_dictionary(36, "t")
TASK = DictionaryTask(SRC, TGT)
SMALL = {"encoder_layers": "[(64, 3)] * 3", "decoder_layers": "[(64, 3)] * 3",
         "encoder_embed_dim": 32, "decoder_embed_dim": 32, "decoder_out_embed_dim": 32}


def _logits(model, batch):
    src, lengths, prev, _ = batch
    model.eval()
    with torch.no_grad():
        return model(src, lengths, prev)[0]


def test_an_int8_state_dict_loads_into_a_model_built_with_int8_weights_and_gives_the_same_outputs():
    torch.manual_seed(0)
    model = build_plugin_model("fconv", TASK, **SMALL)
    model.quantize_int8_()
    state = model.state_dict()
    assert state["decoder.convolutions.0.int8.weight"].dtype == torch.int8
    assert state["encoder.embed_tokens.int8.weight"].dtype == torch.int8
    assert not any(name.endswith(("weight_g", "weight_v")) for name in state)
    torch.manual_seed(5)
    rebuilt = build_plugin_model("fconv", TASK, int8_weights=True, **SMALL)
    rebuilt.load_state_dict(state, strict=True)
    batch = translation_batch(SRC, TGT, [7, 4, 9], [5, 8, 3], seed=3)
    assert torch.equal(_logits(rebuilt, batch), _logits(model, batch))


def test_int8_outputs_stay_close_to_fairseqs_float32_model_and_steps_match_the_full_pass():
    torch.manual_seed(1)
    ours, reference = build_pair("fconv", TASK, **SMALL)
    int8 = copy.deepcopy(ours)
    int8.quantize_int8_()
    batch = translation_batch(SRC, TGT, [7, 4, 9], [5, 8, 3], seed=3)
    assert relative_error(_logits(int8, batch), _logits(reference, batch)) < 0.05
    src, lengths, prev, _ = batch
    prev = prev.clone()
    prev[prev.eq(TGT.pad())] = TGT.index("t1")
    with torch.no_grad():
        full = int8(src, lengths, prev)[0]
        encoder_out = int8.encoder(src, lengths)
        state = {}
        steps = torch.cat([int8.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)[0]
                           for t in range(prev.size(1))], dim=1)
    # one step quantises a single row's activations, the full pass all rows at once
    assert relative_error(steps, full) < 0.05


def test_a_decoder_embedding_shared_with_the_output_layer_stays_float32():
    overrides = dict(SMALL, share_input_output_embed=True)
    torch.manual_seed(2)
    float32 = build_plugin_model("fconv", TASK, **overrides)
    model = copy.deepcopy(float32)
    model.quantize_int8_()
    assert type(model.decoder.embed_tokens) is TokenEmbedding
    assert model.decoder.fc3.weight is model.decoder.embed_tokens.weight
    assert torch.equal(model.decoder.embed_tokens.weight, float32.decoder.embed_tokens.weight)
    assert type(model.encoder.embed_tokens) is Int8Embedding
    batch = translation_batch(SRC, TGT, [5, 7], [4, 6], seed=1)
    assert relative_error(_logits(model, batch), _logits(float32, batch)) < 0.05


def test_int8_state_dict_names_follow_the_float_ones_as_fconv_quantize_checkpoints_have_them():
    """Checkpoints written by fconv-quantize: each weight-normalised ``X.weight_g``/``X.weight_v``
    becomes ``X.int8.weight`` and ``X.int8.scale``, each embedding ``X.weight`` likewise; the
    rest (biases, the decoder's version) keeps its name and value."""
    torch.manual_seed(3)
    float32 = build_plugin_model("fconv", TASK, **SMALL)
    model = copy.deepcopy(float32)
    model.quantize_int8_()
    float_state, int8_state = float32.state_dict(), model.state_dict()
    expected = set()
    for name in float_state:
        if name.endswith("weight_g"):
            continue
        if name.endswith(("weight_v", "embed_tokens.weight", "embed_positions.weight")):
            layer = name.rsplit(".", 1)[0]
            expected |= {f"{layer}.int8.weight", f"{layer}.int8.scale"}
        else:
            expected.add(name)
            assert torch.equal(int8_state[name], float_state[name])
    assert set(int8_state) == expected


@pytest.mark.parametrize("copying", [False, True], ids=["plain", "copying"])
def test_a_sentence_gets_the_same_int8_translation_alone_and_in_a_padded_batch(copying):
    """What a server batching requests needs: rounding activations to 8 bits must not turn
    the batch's last-bit differences (attention products, the length scale, a copying
    model's context, copy sums and per-word logs) into other answers."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(5)
    task, target = (DictionaryTask(SRC, SRC), SRC) if copying else (TASK, TGT)  # copying needs one dictionary
    model = build_plugin_model("fconv_iwslt_de_en", task, pointer_generator=copying, **SMALL).eval()
    model.quantize_int8_()
    assert (model.decoder.pointer_generator is not None) == copying
    src, lengths, _, _ = translation_batch(SRC, target, [3, 11, 7, 5, 9, 2, 11, 6], [1] * 8, seed=2)
    for beam in (1, 5):
        generator = SequenceGenerator([model], target, beam_size=beam, max_len_b=12)
        with torch.no_grad():
            together = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
            for row in range(src.size(0)):
                alone_src = src[row: row + 1, src.size(1) - int(lengths[row]):]  # without the batch's padding
                alone = generator.generate([model], {"net_input": {"src_tokens": alone_src, "src_lengths": lengths[row: row + 1]}})
                for ours, single in zip(together[row], alone[0]):
                    assert torch.equal(ours["tokens"], single["tokens"]), (beam, row)
                    assert torch.equal(ours["positional_scores"], single["positional_scores"]), (beam, row)
