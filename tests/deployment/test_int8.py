"""int8 weights and layers against float64 re-computations with the same (dequantised) weights."""

import pytest
import torch
from torch import nn

from fconv_plugin import backend
from fconv_plugin.errors import FConvError
from fconv_plugin.modules.causal_convolution import CausalConvolution
from fconv_plugin.modules.embeddings import LearnedPositionalEmbedding, TokenEmbedding, make_positions
from fconv_plugin.deployment.int8 import (
    Int8CausalConvolution,
    Int8ConvTBC,
    Int8Embedding,
    Int8Linear,
    Int8PositionalEmbedding,
    Int8Weight,
    kernel_as_rows,
    swap_in_int8_modules_,
)
from fconv_plugin.modules.weight_norm import WeightNormConvTBC, WeightNormLinear
from tests.support import needs_compiled

# each row of activations is rounded to 8 bits with its own scale: under 1% of the output's range
TOLERANCE = 0.02


def _close_to(actual, expected):
    return (actual.double() - expected).abs().max() < TOLERANCE * expected.abs().max()


def _dequantized_kernel(layer):
    """The int8 layer's kernel back in ConvTBC layout (k, in, out), float64."""
    return layer.int8.dequantized().double().t().reshape(layer.kernel_size, layer.in_channels, layer.out_channels)


def test_each_row_is_rounded_to_its_own_scale():
    weight = torch.tensor([[1.27, -0.5, 0.0], [0.001, 0.002, -0.00254]])
    int8 = Int8Weight.from_float(weight)
    assert int8.weight.dtype == torch.int8
    assert torch.allclose(int8.scale, torch.tensor([0.01, 0.00002]))
    assert int8.weight.tolist() == [[127, -50, 0], [50, 100, -127]]  # by hand: w / scale, rounded
    assert (int8.dequantized() - weight).abs().le(int8.scale.unsqueeze(1) / 2 + 1e-9).all()


def test_linear_is_close_to_float64_with_the_dequantised_weight():
    torch.manual_seed(0)
    int8 = Int8Weight.from_float(torch.randn(48, 64))
    bias = torch.randn(48)
    x = torch.randn(5, 7, 64)
    expected = x.double() @ int8.dequantized().double().t() + bias.double()
    actual = int8.linear(x, bias)
    assert actual.shape == (5, 7, 48)
    assert _close_to(actual, expected)


def test_linear_is_the_exact_product_of_rows_rounded_each_to_its_own_scale():
    weight = torch.tensor([[1.27, -0.5, 0.0], [0.001, 0.002, -0.00254]])  # scales 0.01 and 0.00002
    x = torch.tensor([[2.54, 1.0, -0.02], [0.0, -0.127, 0.05]])  # row scales 0.02 and 0.001
    bias = torch.tensor([0.5, -1.0])
    # by hand: x rounded per row to [[127, 50, -1], [0, -127, 50]], w to [[127, -50, 0], [50, 100, -127]]
    sums = torch.tensor([[127 * 127 - 50 * 50, 127 * 50 + 50 * 100 + 127], [127 * 50, -127 * 100 - 50 * 127]])
    expected = sums.double() * torch.tensor([[0.02], [0.001]]).double() * torch.tensor([0.01, 0.00002]).double()
    actual = Int8Weight.from_float(weight).linear(x, bias)
    assert torch.allclose(actual.double(), expected + bias.double(), rtol=1e-6, atol=1e-9)


def test_a_rows_result_does_not_depend_on_the_rows_beside_it():
    """What a server batching sentences of different requests needs: each its own answer."""
    torch.manual_seed(4)
    int8 = Int8Weight.from_float(torch.randn(40, 96))
    bias = torch.randn(40)
    x = torch.randn(6, 96)
    x[3] *= 50.0  # one loud row, which a single scale per call would let round the others away
    together = int8.linear(x, bias)
    for row in range(6):
        assert torch.equal(together[row], int8.linear(x[row : row + 1], bias)[0])


def test_convolution_over_windows_matches_conv_tbc_in_float64():
    torch.manual_seed(1)
    k, c_in, c_out = 3, 16, 24
    kernel = torch.randn(k, c_in, c_out)
    int8 = Int8Weight.from_float(kernel_as_rows(kernel))
    bias = torch.randn(c_out)
    x = torch.randn(9, 2, c_in)
    dequantized_kernel = int8.dequantized().t().reshape(k, c_in, c_out)
    expected = torch.conv_tbc(x.double(), dequantized_kernel.double(), bias.double(), 1)
    actual = int8.convolve_tbc(x, k, padding=1, bias=bias)
    assert actual.shape == expected.shape == (9, 2, c_out)
    assert _close_to(actual, expected)


def test_embedding_rows_are_the_dequantised_rows():
    table = torch.randn(10, 6)
    int8 = Int8Weight.from_float(table)
    indices = torch.tensor([[3, 0], [9, 3]])
    assert torch.equal(int8.embedding(indices), int8.dequantized()[indices])


def test_kernel_as_rows_puts_tap_j_channel_c_in_column_j_times_in_plus_c():
    kernel = torch.arange(2 * 3 * 4).reshape(2, 3, 4)  # k=2, in=3, out=4
    rows = kernel_as_rows(kernel)
    assert rows.shape == (4, 6)
    assert all(rows[o, j * 3 + c] == kernel[j, c, o] for o in range(4) for j in range(2) for c in range(3))


def test_int8_linear_is_the_weight_normalised_layer_with_its_weight_quantised():
    torch.manual_seed(2)
    layer = WeightNormLinear(16, 12)
    nn.init.normal_(layer.bias)
    int8 = Int8Linear.from_float(layer)
    assert torch.equal(int8.int8.weight, Int8Weight.from_float(layer.normalized_weight()).weight)
    x = torch.randn(3, 5, 16)
    expected = x.double() @ int8.int8.dequantized().double().t() + layer.bias.double()
    assert _close_to(int8(x), expected)
    assert _close_to(int8(x), layer(x).double().detach())


def test_int8_encoder_convolution_matches_conv_tbc_with_the_dequantised_kernel():
    torch.manual_seed(3)
    layer = WeightNormConvTBC(8, 10, 5)
    nn.init.normal_(layer.bias)
    int8 = Int8ConvTBC.from_float(layer)
    x = torch.randn(11, 2, 8)
    expected = torch.conv_tbc(x.double(), _dequantized_kernel(int8), layer.bias.double(), 2)
    assert _close_to(int8.convolve(x, padding=2), expected)


def test_int8_causal_convolution_full_pass_and_steps_match_a_causal_float64_convolution():
    torch.manual_seed(4)
    layer = CausalConvolution(6, 8, 3)
    nn.init.normal_(layer.bias)
    int8 = Int8CausalConvolution.from_float(layer).eval()
    x = torch.randn(7, 2, 6)
    left_padded = torch.cat([torch.zeros(2, 2, 6), x]).double()
    expected = torch.conv_tbc(left_padded, _dequantized_kernel(int8), layer.bias.double(), 0)
    assert expected.shape == (7, 2, 8)
    with torch.no_grad():
        assert _close_to(int8(x), expected)
        state = {}
        steps = torch.cat([int8(x[t].unsqueeze(1), state) for t in range(7)], dim=1).transpose(0, 1)
    assert _close_to(steps, expected)


def test_int8_embeddings_look_up_the_dequantised_rows_at_the_same_positions():
    torch.manual_seed(5)
    tokens = torch.tensor([[1, 1, 7, 4], [5, 6, 7, 8]])  # padding_idx 1, left-padded first row
    table = TokenEmbedding(10, 6, padding_idx=1)
    int8 = Int8Embedding.from_float(table)
    assert torch.equal(int8(tokens), int8.int8.dequantized()[tokens])
    positions = LearnedPositionalEmbedding(12, 6, padding_idx=1)
    int8_positions = Int8PositionalEmbedding.from_float(positions)
    assert int8_positions.max_positions == positions.max_positions == 10
    rows = int8_positions.int8.dequantized()[make_positions(tokens, 1)]
    assert torch.equal(int8_positions(tokens), rows)
    assert torch.equal(int8_positions(tokens, last_step_only=True), rows[:, -1:])


def test_swapping_replaces_each_float_layer_once_and_keeps_what_it_is_told_to():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = WeightNormLinear(4, 4)
            self.again = self.shared  # one layer under two names
            self.layers = nn.ModuleList([CausalConvolution(4, 8, 3), None, WeightNormConvTBC(4, 8, 2)])
            self.kept = TokenEmbedding(9, 4, padding_idx=1)
            self.plain = nn.Linear(4, 4)

    block = Block()
    kept, plain = block.kept, block.plain
    swap_in_int8_modules_(block, keep=[kept])
    assert type(block.shared) is Int8Linear and block.again is block.shared
    assert type(block.layers[0]) is Int8CausalConvolution and block.layers[1] is None
    assert type(block.layers[2]) is Int8ConvTBC
    assert block.kept is kept and block.plain is plain
    assert not any(name.endswith(("weight_g", "weight_v")) for name in block.state_dict())


def test_a_layer_without_an_int8_form_is_refused_by_name():
    class MyLinear(WeightNormLinear):
        pass

    holder = nn.Sequential(MyLinear(3, 3))
    with pytest.raises(FConvError, match="MyLinear has no int8 form"):
        swap_in_int8_modules_(holder)


def test_the_attentions_sums_in_int8_models_are_float64_sums_rounded_back():
    from fconv_plugin.modules.attention import AttentionSums
    from fconv_plugin.deployment.int8 import BatchInvariantSums

    torch.manual_seed(0)
    sums = BatchInvariantSums.from_float(AttentionSums())
    a, b = torch.randn(3, 4, 5), torch.randn(3, 5, 6)
    assert torch.equal(sums.product(a, b), torch.bmm(a.double(), b.double()).float())
    # keys and values prepared once per source (AttentionSource.summed_by) give the same products
    assert torch.equal(sums.product(a, sums.operand(b)), sums.product(a, b))
    query, keys = torch.randn(2, 3, 4), torch.randn(2, 4, 7)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[0, :2] = True
    scores = torch.bmm(query.double(), keys.double()).masked_fill(padding.unsqueeze(1), float("-inf"))
    assert torch.equal(sums.weights(query, keys, padding), torch.softmax(scores, dim=-1).float())
    # one sentence's rows give the same bits alone as among 64
    queries, keys = torch.randn(64, 9, 50), torch.randn(64, 50, 30)
    assert torch.equal(sums.product(queries, keys)[5:6], sums.product(queries[5:6], keys[5:6]))
    assert torch.equal(sums.weights(queries, keys, None)[5:6], sums.weights(queries[5:6], keys[5:6], None))


def test_quantising_a_copying_model_swaps_every_attention_sum_and_gate_and_adds_no_state():
    from fconv_plugin.deployment.int8 import BatchInvariantSums, PreciseGatedLinearUnit
    from tests.support import DictionaryTask, build_plugin_model, make_dictionary

    words = make_dictionary(30)
    model = build_plugin_model("fconv_gigaword_copy", DictionaryTask(words, words),
                               encoder_layers="[(32, 3)] * 2", decoder_layers="[(32, 3)] * 2",
                               encoder_embed_dim=16, decoder_embed_dim=16, decoder_out_embed_dim=16)
    names = set(model.state_dict())
    model.quantize_int8_()
    attention_sums = [layer.sums for layer in model.decoder.attention if layer is not None]
    assert attention_sums and all(type(s) is BatchInvariantSums for s in attention_sums)
    assert type(model.decoder.pointer_generator.sums) is BatchInvariantSums
    assert type(model.encoder.gate) is PreciseGatedLinearUnit and type(model.decoder.gate) is PreciseGatedLinearUnit
    assert not any("sums" in name or name.startswith(("encoder.gate", "decoder.gate")) for name in names | set(model.state_dict()))


def test_the_gate_of_int8_models_is_float64_rounded_back():
    """v([A B]) = A · σ(B) as torch's float64 glu computes it, rounded to float32 once."""
    from fconv_plugin.modules.conv_block import GatedLinearUnit
    from fconv_plugin.deployment.int8 import PreciseGatedLinearUnit

    torch.manual_seed(0)
    x = torch.randn(7, 3, 64) * 6
    in_float64 = torch.nn.functional.glu(x.double(), dim=-1).float()
    assert torch.equal(PreciseGatedLinearUnit.from_float(GatedLinearUnit())(x), in_float64)
    assert torch.equal(GatedLinearUnit()(x), torch.nn.functional.glu(x, dim=-1))  # float32 models: as fairseq


def test_the_int8_mixture_gives_a_sentence_the_same_bits_alone_and_beside_a_longer_padded_source():
    """The mixture's log and softplus run per source position; torch's vectorised and scalar
    forms differ in the last bit, so the float32 form may change with the batch's width."""
    from fconv_plugin.modules.attention import AttentionSums
    from fconv_plugin.deployment.int8 import BatchInvariantSums
    from fconv_plugin.modules.pointer_generator import mix_generate_and_copy

    sums = BatchInvariantSums.from_float(AttentionSums())
    generator = torch.Generator().manual_seed(3)
    pad, vocab = 1, 44
    for length, width in [(3, 11), (5, 37), (2, 16), (9, 9)]:
        logits, gate = torch.randn(8, 4, vocab, generator=generator), torch.randn(8, 4, 1, generator=generator)
        source = torch.randint(4, vocab, (8, width), generator=generator)
        source[0, : width - length] = pad  # the sentence of row 0 is left-padded in the batch
        scores = torch.randn(8, 4, width, generator=generator).masked_fill(source.eq(pad).unsqueeze(1), float("-inf"))
        attention = torch.softmax(scores, dim=-1)
        together = mix_generate_and_copy(logits, gate, attention, source, sums)
        alone = mix_generate_and_copy(logits[:1], gate[:1], attention[:1, :, width - length:], source[:1, width - length:], sums)
        words = [w for w in range(vocab) if w != pad]  # padding's own column gets the padding's copy floor
        assert torch.equal(together[0][..., words], alone[0][..., words]), (length, width)
        # and the float64 form is the float32 mixture to rounding
        plain = mix_generate_and_copy(logits, gate, attention, source)
        assert (together - plain)[..., words].abs().max() < 1e-5


# --- the fused kernel (int8_rows.cpp) against the same arithmetic as torch operations ---

def _random_rows(generator, rows, width):
    """Rows of very different sizes, some all zero, some with a single loud value."""
    x = torch.randn(rows, width, generator=generator) * torch.rand(rows, 1, generator=generator).mul(20)
    x[::7] = 0.0
    if rows > 2:
        x[1, width // 2] = 1e4
    return x


@needs_compiled("int8_rows")
@pytest.mark.parametrize("rows,width,out", [(1, 3, 5), (5, 256, 256), (80, 768, 512), (33, 17, 7001), (200, 256, 40)])
def test_the_fused_linear_gives_the_bits_of_the_torch_operations(rows, width, out):
    from fconv_plugin.deployment.int8 import quantize_rows

    fused_rows = backend.loop("int8_rows")

    generator = torch.Generator().manual_seed(rows * width + out)
    weight = Int8Weight.from_float(torch.randn(out, width, generator=generator))
    bias = torch.randn(out, generator=generator)
    x = _random_rows(generator, rows, width)
    quantized, scale = fused_rows.quantize_rows(x)
    expected_quantized, expected_scale = quantize_rows(x)
    assert torch.equal(quantized, expected_quantized) and torch.equal(scale, expected_scale)
    for b in (bias, None):
        assert torch.equal(fused_rows.linear(x, weight.weight, weight.scale, b), weight.linear_in_torch_operations(x, b))
    # a strided view (the decoder's windows) is read as its values
    wide = torch.randn(rows, 2 * width, generator=generator)
    assert torch.equal(weight.linear(wide[:, ::2], bias), weight.linear_in_torch_operations(wide[:, ::2].contiguous(), bias))


@needs_compiled("int8_rows")
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_fused_linear_splits_products_across_threads_without_changing_a_bit(threads):
    """Between a million and a hundred million multiply-adds each thread takes a block of rows,
    and for a wide output a block of columns (its own int8 product and scale-back); integer
    sums are exact, so any split gives the same bits."""
    fused_rows = backend.loop("int8_rows")

    generator = torch.Generator().manual_seed(threads)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        for rows, width, out in [(80, 256, 4576), (80, 768, 512), (81, 256, 200), (300, 64, 129), (400, 768, 512)]:
            weight = Int8Weight.from_float(torch.randn(out, width, generator=generator))
            bias = torch.randn(out, generator=generator)
            x = _random_rows(generator, rows, width)
            for b in (bias, None):
                assert torch.equal(fused_rows.linear(x, weight.weight, weight.scale, b),
                                   weight.linear_in_torch_operations(x, b)), (rows, width, out)
    finally:
        torch.set_num_threads(before)


@needs_compiled("int8_rows")
def test_the_fused_linear_sums_exactly_in_integers():
    """The int32 sums recomputed by hand in int64 from the int8 rows, scaled back in float64."""
    fused_rows = backend.loop("int8_rows")

    generator = torch.Generator().manual_seed(11)
    weight = Int8Weight.from_float(torch.randn(30, 768, generator=generator))
    x = _random_rows(generator, 9, 768)
    quantized, scale = fused_rows.quantize_rows(x)
    sums = quantized.long() @ weight.weight.long().t()
    expected = sums.double() * scale.double() * weight.scale.double()
    actual = fused_rows.linear(x, weight.weight, weight.scale, None)
    assert torch.allclose(actual.double(), expected, rtol=3e-7, atol=0)


def _vnni_loops():
    fused_rows = backend.loop("int8_rows")

    if not fused_rows.vnni:
        pytest.skip("this CPU has no AVX-512 VNNI: every product is torch's int8 product here")
    return fused_rows


@needs_compiled("int8_rows")
@pytest.mark.parametrize("width,out", [(256, 256), (768, 512), (256, 4576), (17, 40), (3, 5), (6, 33), (31, 7), (64, 24)])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("tiles", [True, False], ids=["AMX where it runs", "VNNI loops"])
def test_the_packed_product_gives_the_bits_of_torchs_int8_product(width, out, threads, tiles):
    """A layer's rows times its packed weight (int8_rows.cpp: AMX tiles where the CPU has them
    and the inputs are a multiple of 64, else the VNNI loops) against torch's int8 product and
    scaling (the torch form): every VNNI tile of 1-4 rows and 1-4 blocks of 16 outputs, AMX
    tiles full and partly filled, inputs and outputs that fill no whole group or block, weights
    at +-127, rows up to and past where torch's product takes over from the VNNI loops, with
    and without a bias, split across threads or not."""
    fused_rows = _vnni_loops()
    if tiles and not fused_rows.amx():
        pytest.skip("this CPU (or its kernel) gives no AMX tiles: the VNNI loops run here")
    generator = torch.Generator().manual_seed(width * out + threads)
    weight = Int8Weight.from_float(torch.randn(out, width, generator=generator))
    weight.weight[0] = 127
    weight.weight[-1] = -127
    packed = fused_rows.pack_weight(weight.weight)
    bias = torch.randn(out, generator=generator)
    threads_before, tiles_before = torch.get_num_threads(), fused_rows.use_amx(tiles)
    try:
        torch.set_num_threads(threads)
        for rows in (1, 2, 3, 4, 5, 9, 16, 17, 33, 48, 49, 128, 129, 640):
            x = _random_rows(generator, rows, width)
            for b in (bias, None):
                assert torch.equal(fused_rows.linear(x, weight.weight, weight.scale, b, *packed),
                                   weight.linear_in_torch_operations(x, b)), (rows, b is None)
    finally:
        torch.set_num_threads(threads_before)
        fused_rows.use_amx(tiles_before)


@needs_compiled("int8_rows")
@pytest.mark.parametrize("tiles", [True, False], ids=["AMX where it runs", "VNNI loops"])
def test_the_packed_product_is_exact_where_its_unsigned_sums_leave_int32(tiles):
    """70,000 inputs: sum u·w (u = q + 128, up to 255) passes 2^31 and wraps, yet less the
    compensation (128 · sum w) it is the true sum, which fits; checked against int64 sums."""
    fused_rows = _vnni_loops()
    if tiles and not fused_rows.amx():
        pytest.skip("this CPU (or its kernel) gives no AMX tiles: the VNNI loops run here")
    width = 70_000
    weight = Int8Weight(16, width)
    weight.weight.fill_(127)
    weight.weight[1::2] = -127
    x = torch.ones(2, width)
    x[1, ::3] = -1.0
    quantized, scale = fused_rows.quantize_rows(x)
    expected = (quantized.long() @ weight.weight.long().t()).double() * scale.double()  # weight scales are 1
    unsigned_sums = (quantized.long() + 128) @ weight.weight.long().t()
    assert unsigned_sums.abs().max() > 2**31  # what vpdpbusd and the tiles sum wraps in int32
    before = fused_rows.use_amx(tiles)
    try:
        actual = fused_rows.linear(x, weight.weight, weight.scale, None, *fused_rows.pack_weight(weight.weight))
    finally:
        fused_rows.use_amx(before)
    assert torch.equal(actual, weight.linear_in_torch_operations(x, None))  # torch's int8 product, exact int32
    assert torch.allclose(actual.double(), expected, rtol=1e-7, atol=0)


@needs_compiled("int8_rows")
def test_the_packed_weight_holds_each_outputs_inputs_four_by_four_and_its_compensation():
    """By hand: output n, input k at block n // 16, group k // 4, byte (n % 16) * 4 + k % 4,
    zero where there is no weight; the compensation is 128 times each output's sum."""
    fused_rows = _vnni_loops()
    weight = torch.arange(-60, 60, dtype=torch.int8)[:17 * 6].reshape(17, 6)
    packed, compensation = fused_rows.pack_weight(weight)
    assert packed.shape == (2, 2, 64) and compensation.shape == (32,)
    assert packed[0, 0, :8].tolist() == [-60, -59, -58, -57, -54, -53, -52, -51]  # outputs 0 and 1, inputs 0-3
    assert packed[0, 1, :8].tolist() == [-56, -55, 0, 0, -50, -49, 0, 0]  # inputs 4, 5, then padding
    assert packed[1, 0, :4].tolist() == weight[16, :4].tolist() and not packed[1, 0, 4:].any()
    assert compensation[:17].tolist() == (128 * weight.long().sum(dim=1)).tolist()
    assert not compensation[17:].any()


@needs_compiled("int8_rows")
def test_an_int8_weight_changed_in_place_is_packed_again():
    """The packing is kept with the weight's version: a weight loaded or edited after a first
    product gives the new weight's products, never the old packing's."""
    fused_rows = _vnni_loops()
    generator = torch.Generator().manual_seed(5)
    layer = Int8Weight.from_float(torch.randn(40, 32, generator=generator))
    x = torch.randn(3, 32, generator=generator)
    first = layer.packed()
    assert layer.packed()[0] is first[0]  # packed once
    layer.weight.copy_(Int8Weight.from_float(torch.randn(40, 32, generator=generator)).weight)
    assert layer.packed()[0] is not first[0]
    assert torch.equal(layer.linear(x, None), layer.linear_in_torch_operations(x, None))
    assert torch.equal(layer.row_function(None)(x), layer.linear_in_torch_operations(x, None))
    with pytest.raises(RuntimeError, match="does not match this weight"):
        fused_rows.linear(x, layer.weight, layer.scale, None, *fused_rows.pack_weight(layer.weight[:, :16]))


@needs_compiled("int8_rows")
@pytest.mark.parametrize("batch,rows,embed,length", [(1, 1, 8, 1), (3, 5, 256, 29), (16, 10, 64, 57), (7, 4, 17, 3),
                                                     (2, 13, 9, 100), (5, 7, 300, 8)])
def test_the_fused_attention_sums_are_float64_sums_rounded_once_and_batch_invariant(batch, rows, embed, length):
    fused_rows = backend.loop("int8_rows")

    generator = torch.Generator().manual_seed(batch * 1000 + length)
    query = torch.randn(batch, rows, embed, generator=generator)
    keys = torch.randn(batch, embed, length, generator=generator)
    values = torch.randn(batch, length, embed, generator=generator)
    padding = torch.rand(batch, length, generator=generator) < 0.3
    padding[:, -1] = False
    scores = torch.bmm(query.double(), keys.double()).masked_fill(padding.unsqueeze(1), float("-inf"))
    weights = fused_rows.attention_weights(query, keys, padding)
    assert torch.equal(weights, torch.softmax(scores, dim=-1).float())
    assert torch.equal(fused_rows.attention_weights(query, keys, None), torch.softmax(torch.bmm(query.double(), keys.double()), -1).float())
    context = fused_rows.attention_read(weights, values)
    assert torch.equal(context, torch.bmm(weights.double(), values.double()).float())
    last = batch - 1  # one sentence alone gives the bits it gets among the others
    assert torch.equal(fused_rows.attention_weights(query[last:], keys[last:], padding[last:]), weights[last:])
    assert torch.equal(fused_rows.attention_read(weights[last:], values[last:]), context[last:])


@needs_compiled("int8_rows")
@pytest.mark.parametrize("shape", [(80, 1, 512), (7, 3, 74), (33, 5, 2), (300, 200, 512), (1, 6)])
def test_the_fused_gate_gives_the_bits_of_the_torch_operations(shape):
    """Shapes whose halves are odd, and one over torch's 32,768-value grain (split across threads)."""
    from fconv_plugin.deployment.int8 import PreciseGatedLinearUnit

    fused_rows = backend.loop("int8_rows")

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))) * 6
    assert torch.equal(fused_rows.gate(x), PreciseGatedLinearUnit.forward_in_torch_operations(x))
    assert torch.equal(PreciseGatedLinearUnit()(x), fused_rows.gate(x))


@needs_compiled("int8_rows")
@pytest.mark.parametrize("batch, rows, length", [(16, 5, 40), (3, 7, 37), (2, 3, 9), (4, 5, 200)])
def test_the_attention_sums_give_the_same_bits_with_512_and_256_bit_registers(batch, rows, length):
    """Sources of 16k, 8k + 5, 9 and 200 positions: every path through the blocks of 16, 8 and one."""
    fused_rows = backend.loop("int8_rows")

    if not fused_rows.avx512:
        pytest.skip("this CPU has no AVX-512: only the 256-bit loops run here")
    generator = torch.Generator().manual_seed(length)
    query, keys = torch.randn(batch, rows, 256, generator=generator), torch.randn(batch, 256, length, generator=generator)
    values = torch.randn(batch, length, 256, generator=generator)
    padding = torch.rand(batch, length, generator=generator) < 0.2
    padding[:, 0] = False
    answers = []
    before = fused_rows.use_wide_registers(True)
    try:
        for wide in (True, False):
            fused_rows.use_wide_registers(wide)
            weights = fused_rows.attention_weights(query, keys, padding)
            answers.append((weights, fused_rows.attention_read(weights, values)))
    finally:
        fused_rows.use_wide_registers(before)
    assert torch.equal(answers[0][0], answers[1][0]) and torch.equal(answers[0][1], answers[1][1])


@pytest.mark.parametrize("shape", [(80,), (16, 5), (3000,)])
def test_the_fused_embedding_gives_the_bits_of_the_torch_operations(shape):
    """A beam's tokens, a batch x time block, and more rows than one thread's grain."""
    generator = torch.Generator().manual_seed(len(shape))
    int8 = Int8Weight.from_float(torch.randn(4576, 256, generator=generator))
    indices = torch.randint(0, 4576, shape, generator=generator)
    fused = int8.embedding(indices)
    assert fused.shape == (*shape, 256)
    assert torch.equal(fused, int8.embedding_in_torch_operations(indices))


@needs_compiled("int8_rows")
def test_the_fused_embedding_refuses_an_index_outside_the_table():
    fused_rows = backend.loop("int8_rows")

    int8 = Int8Weight.from_float(torch.randn(10, 4))
    for index in (10, -1):
        with pytest.raises(IndexError, match=f"index {index} is out of range for a table of 10 rows"):
            fused_rows.embedding(torch.tensor([3, index]), int8.weight, int8.scale)


@needs_compiled("int8_rows")
def test_the_compiled_loops_refuse_tensors_off_the_cpu_with_one_line():
    """They read CPU memory; a tensor elsewhere (here torch's storage-less meta device, which
    every machine has) gets an error that says what to do, not a crash."""
    fused_rows = backend.loop("int8_rows")

    meta = {"device": "meta"}
    calls = [
        lambda: fused_rows.gate(torch.empty(4, 8, **meta)),
        lambda: fused_rows.quantize_rows(torch.empty(4, 8, **meta)),
        lambda: fused_rows.linear(torch.empty(4, 8, **meta), torch.zeros(3, 8, dtype=torch.int8), torch.ones(3), None),
        lambda: fused_rows.attention_weights(torch.empty(2, 5, 8, **meta), torch.empty(2, 8, 7, **meta), None),
        lambda: fused_rows.attention_read(torch.empty(2, 5, 7, **meta), torch.empty(2, 7, 8, **meta)),
        lambda: fused_rows.embedding(torch.zeros(3, dtype=torch.long, **meta), torch.zeros(5, 4, dtype=torch.int8),
                                     torch.ones(5)),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="int8 models run on the CPU .*; add --cpu"):
            call()


@needs_compiled("int8_rows")
def test_a_layer_one_input_wide_sums_each_product_exactly():
    """One input a row (torch._int_mm returns wrong sums there): both forms give q_r w_o
    scaled back, against the same product in float64."""
    from fconv_plugin.deployment.int8 import quantize_rows

    fused_rows = backend.loop("int8_rows")

    generator = torch.Generator().manual_seed(3)
    weight = Int8Weight.from_float(torch.randn(7, 1, generator=generator))
    bias = torch.randn(7, generator=generator)
    x = torch.randn(9, 1, generator=generator)
    quantized, row_scale = quantize_rows(x)
    exact = (quantized.double() * weight.weight.t().double()) * row_scale.double() * weight.scale.double()
    for b in (None, bias):
        torch_form = weight.linear_in_torch_operations(x, b)
        assert torch.equal(fused_rows.linear(x, weight.weight, weight.scale, b), torch_form)
        if fused_rows.vnni:  # the packed loops (AMX tiles or VNNI), where the CPU has them
            assert torch.equal(fused_rows.linear(x, weight.weight, weight.scale, b, *weight.packed()), torch_form)
        expected = exact if b is None else exact + b.double()
        assert torch.allclose(torch_form.double(), expected, rtol=1e-6, atol=1e-6)
