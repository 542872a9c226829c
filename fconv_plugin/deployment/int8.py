"""int8 forms of the model's layers, for deployment on CPUs (not in the paper: a way to serve its model).

Every matrix product of a trained model (convolutions, attention projections, fc1,
fc2, fc3, residual projections) can run with int8 weights: each output row of the
weight is stored as int8 with its own scale (symmetric, per channel). Activations are
quantised on the fly, each row (one position of one sentence) with its own scale, and
the int8 × int8 product is summed exactly in int32 (``torch._int_mm``, or the compiled
loops' AMX tiles or VNNI instructions: the same integers). So a row's
result depends on that row alone, never on the sentences batched with it: a server
that batches requests gives each sentence the answer it would get alone. The
attention's own sums (dot products with the encoder states, the softmax, the weighted
read, and a copying model's mixture) run in float64 and are rounded back
(``BatchInvariantSums``): float32's batched products differ in their last bits with
the number of sentences in the call, and int8 rounding would turn those bits into a
different translation now and then.
Embedding tables are stored the same way, and a looked-up row is turned back into
float32. The convolution blocks' gate σ runs in float64 too (``PreciseGatedLinearUnit``):
torch's and onnxruntime's float32 sigmoids differ in the last bit now and then, and the
next layer's int8 rounding turns such a bit into another translation; in float64 both
round to the same float32, so an exported int8 model answers as torch's does.

Convolutions become one matrix product over windows: a kernel (k, in, out) is the
matrix (out, k · in), and the input is cut into its windows of k steps
(``convolution_windows``), the same row order the decoder's one-step convolution uses.

Both the int8 product and the float64 sums run as compiled loops where the package was
installed with torch (``native/int8_rows.cpp``: one call per layer instead of a dozen small
kernels, the same bits); otherwise as the torch operations written here.

``swap_in_int8_modules_`` replaces each float layer of a trained model by its int8
form (inference only). The int8 layers keep fairseq-style state-dict names:
``<layer>.int8.weight``, ``<layer>.int8.scale`` and ``<layer>.bias``.
"""

from typing import Callable, Dict, Iterable, Optional, Type

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import backend
from ..modules.attention import AttentionSums
from ..modules.causal_convolution import CausalConvolution, CausalWindow
from ..modules.conv_block import GatedLinearUnit
from ..modules.embeddings import LearnedPositionalEmbedding, TokenEmbedding, positions_to_embed
from ..modules.layer_swap import replace_layers_
from ..modules.weight_norm import WeightNormalized, WeightNormConvTBC, WeightNormLinear

def quantize_rows(x: Tensor):
    """Symmetric int8 rounding of each row of ``x`` (rows x features) to its own scale."""
    scale = x.abs().amax(dim=1, keepdim=True).clamp_min_(1e-12).div_(127.0)
    return x.div(scale).round_().to(torch.int8), scale


class Int8Weight(nn.Module):
    """A weight matrix (out x in) as int8 rows and one float scale per row."""

    def __init__(self, out_features: int, in_features: int):
        super().__init__()
        self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("scale", torch.ones(out_features))
        self._packed_for = None  # the weight (storage, version) that _packed was packed from

    def packed(self):
        """The weight as the compiled loops multiply rows by it (``int8_rows.cpp``: AMX tiles
        where the CPU has them, else AVX-512 VNNI loops for a decoding step's few rows): the
        packed weight and its compensation, packed once and again only when the weight
        changes; ``(None, None)`` where neither runs (torch's int8 product does)."""
        if not backend.packed_int8_products():
            return None, None
        packed_for = (self.weight.data_ptr(), self.weight._version)
        if self._packed_for != packed_for:
            self._packed = tuple(backend.int8_loops().pack_weight(self.weight))
            self._packed_for = packed_for
        return self._packed

    @classmethod
    def from_float(cls, weight: Tensor) -> "Int8Weight":
        """Symmetric per-row quantisation: w ≈ scale · q, q in [-127, 127]."""
        weight = weight.detach().float()
        int8 = cls(*weight.shape)
        scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0
        int8.weight.copy_(torch.round(weight / scale.unsqueeze(1)).clamp(-127, 127).to(torch.int8))
        int8.scale.copy_(scale)
        return int8

    def dequantized(self) -> Tensor:
        return self.weight.float() * self.scale.unsqueeze(1)

    def linear(self, x: Tensor, bias: Optional[Tensor]) -> Tensor:
        """x @ wᵀ + b over the last dimension of ``x``, each row of ``x`` quantised on its own.

        |Σ q_x · q_w| ≤ 127² · in < 2³¹, so the int32 sums are exact. Scaling back
        broadcasts per row and per column, so every row runs the same elementwise code
        whatever the number of rows beside it.
        """
        rows = x.reshape(-1, x.size(-1))
        loops = backend.int8_loops()
        if loops is not None:
            return loops.linear(rows, self.weight, self.scale, bias, *self.packed()).view(*x.shape[:-1], -1)
        return self.linear_in_torch_operations(rows, bias).view(*x.shape[:-1], -1)

    def row_function(self, bias: Optional[Tensor]) -> Callable[[Tensor], Tensor]:
        """``linear`` of a matrix of rows, with its form chosen once: what the decoder's step
        calls at every position (``decoding/steps.py``)."""
        loops = backend.int8_loops()
        if loops is not None:
            return Int8Rows(loops, self.weight, self.scale, bias, *self.packed())
        return lambda rows: self.linear_in_torch_operations(rows, bias)

    def linear_in_torch_operations(self, rows: Tensor, bias: Optional[Tensor]) -> Tensor:
        """``linear`` of a matrix as torch operations: the reference the fused kernel
        (``int8_rows.cpp``) is tested against bit for bit, and its stand-in where it is not built."""
        if rows.dtype != torch.float32 or not rows.is_contiguous():
            rows = rows.float().contiguous()
        quantized, row_scale = quantize_rows(rows)
        if quantized.size(1) == 1:  # torch._int_mm's sums are wrong for one input (torch 2.13); each is one product
            # (int8_rows.cpp's int_products alike)
            sums = quantized.int() * self.weight.t().int()
        else:
            sums = torch._int_mm(quantized, self.weight.t())
        out = sums * row_scale  # int32 sums, as float32
        if bias is None:
            return out.mul_(self.scale)
        if backend.tracing():
            # traced for ONNX, which has no fused multiply-add: b + out · scale rounded once
            # all the same (exact in float64, then rounded), as addcmul's and the kernel's fma
            return (bias.double() + out.double() * self.scale.double()).float()
        return torch.addcmul(bias, out, self.scale)

    def convolve_tbc(self, x: Tensor, kernel_size: int, padding: int, bias: Optional[Tensor]) -> Tensor:
        """The convolution of ``x`` (time x batch x in), zero-padded by ``padding`` at both ends."""
        return self.linear(convolution_windows(x, kernel_size, padding), bias)

    def embedding(self, indices: Tensor) -> Tensor:
        """Rows ``indices`` of the table this matrix holds, as float32."""
        loops = backend.int8_loops()
        if loops is not None and indices.dtype == torch.long:
            return loops.embedding(indices, self.weight, self.scale)  # one pass, the same bits
        return self.embedding_in_torch_operations(indices)

    def embedding_in_torch_operations(self, indices: Tensor) -> Tensor:
        """``embedding`` as torch operations: the reference the compiled loop is tested
        against bit for bit, what an export traces, and the stand-in where it is not built."""
        return F.embedding(indices, self.weight).float() * F.embedding(indices, self.scale.unsqueeze(1))

    def extra_repr(self) -> str:
        return f"{self.weight.size(1)} -> {self.weight.size(0)}, int8 per-row scales, activations per row"


def kernel_as_rows(kernel: Tensor) -> Tensor:
    """A ConvTBC kernel (k, in, out) as the matrix (out, k · in): column j · in + c is w[j, c, :]."""
    return kernel.reshape(-1, kernel.size(2)).t()


def convolution_windows(x: Tensor, kernel_size: int, padding: int) -> Tensor:
    """Every position's window of ``x`` (time x batch x in), zero-padded by ``padding`` at
    both ends: time' x batch x k · in, column j · in + c the window's step j, channel c
    (the columns ``kernel_as_rows`` gives the kernel). The k shifted copies side by side:
    exported, onnxruntime's float32 encoder ran 0.28-0.29 s on the 500 quickstart verses
    this way against 0.31-0.32 s through ``unfold`` (torch alone: alike)."""
    if padding > 0:
        x = F.pad(x, (0, 0, 0, 0, padding, padding))
    length = x.size(0) - kernel_size + 1
    return torch.cat([x[j: j + length] for j in range(kernel_size)], dim=-1)


class Int8Rows:
    """rows ↦ the compiled loops' int8 linear: ``Int8Weight.row_function`` where they are
    built, with its operands named so that the compiled decoder step
    (``native/decoder_step.cpp``) makes the same call."""

    __slots__ = ("loops", "weight", "scale", "bias", "packed", "compensation")

    def __init__(self, loops, weight: Tensor, scale: Tensor, bias: Optional[Tensor], packed: Optional[Tensor],
                 compensation: Optional[Tensor]):
        self.loops = loops  # the compiled int8 loops' module (``backend.int8_loops``)
        self.weight, self.scale, self.bias, self.packed, self.compensation = weight, scale, bias, packed, compensation

    def __call__(self, rows: Tensor) -> Tensor:
        return self.loops.linear(rows, self.weight, self.scale, self.bias, self.packed, self.compensation)


class Int8Linear(nn.Module):
    """``y = x wᵀ + b`` with w in int8: the int8 form of ``WeightNormLinear``."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.int8 = Int8Weight(out_features, in_features)
        self.bias = nn.Parameter(torch.zeros(out_features))

    @classmethod
    def from_float(cls, layer: WeightNormLinear) -> "Int8Linear":
        int8 = cls(layer.in_features, layer.out_features)
        with torch.no_grad():
            int8.int8 = Int8Weight.from_float(layer.normalized_weight())
        int8.bias = layer.bias
        return int8

    def forward(self, x: Tensor) -> Tensor:
        return self.int8.linear(x, self.bias)

    def row_function(self) -> Callable[[Tensor], Tensor]:
        """The layer as a function of a matrix of rows, rows x in ↦ rows x out (the step's
        form of a float ``WeightNormLinear``: ``decoding/layer_functions.row_function``)."""
        return self.int8.row_function(self.bias)

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}"


class Int8ConvTBC(nn.Module):
    """Convolution over time x batch x channel with an int8 kernel: the int8 form of ``WeightNormConvTBC``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.int8 = Int8Weight(out_channels, kernel_size * in_channels)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    @classmethod
    def from_float(cls, layer: WeightNormConvTBC):
        int8 = cls(layer.in_channels, layer.out_channels, layer.kernel_size)
        with torch.no_grad():
            int8.int8 = Int8Weight.from_float(kernel_as_rows(layer.normalized_weight()))
        int8.bias = layer.bias
        return int8

    def convolve(self, x: Tensor, padding: int = 0) -> Tensor:
        """Convolve ``x`` (time x batch x channel), zero-padding both ends by ``padding``."""
        return self.int8.convolve_tbc(x, self.kernel_size, padding, self.bias)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"


class Int8CausalConvolution(CausalWindow, Int8ConvTBC):
    """The decoder's causal, incremental convolution (§3.2) with an int8 kernel."""

    def window_product(self, windows: Tensor) -> Tensor:
        return self.int8.linear(windows, self.bias)

    def row_function(self) -> Callable[[Tensor], Tensor]:
        """``window_product`` as a function of a matrix of flattened windows, to rows x out
        (the step's form of a float ``CausalConvolution``: ``decoding/layer_functions.row_function``)."""
        return self.int8.row_function(self.bias)


class Int8Embedding(nn.Module):
    """An embedding table as int8 rows with per-row scales: the int8 form of ``TokenEmbedding``."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.int8 = Int8Weight(num_embeddings, embedding_dim)

    @classmethod
    def from_float(cls, table: TokenEmbedding):
        int8 = cls(table.num_embeddings, table.embedding_dim, table.padding_idx)
        int8.int8 = Int8Weight.from_float(table.weight)
        return int8

    def forward(self, indices: Tensor) -> Tensor:
        return self.int8.embedding(indices)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, padding_idx={self.padding_idx}"


class Int8PositionalEmbedding(Int8Embedding):
    """The int8 form of ``LearnedPositionalEmbedding`` (§3.1)."""

    @property
    def max_positions(self) -> int:
        return self.num_embeddings - self.padding_idx - 1

    def forward(self, tokens: Tensor, last_step_only: bool = False) -> Tensor:
        return self.at(positions_to_embed(tokens, self.padding_idx, last_step_only))

    def at(self, positions: Tensor) -> Tensor:
        """The embeddings of position numbers (as ``make_positions`` numbers them)."""
        return super().forward(positions)


class BatchInvariantSums(AttentionSums):
    """The attention's sums in float64, rounded back: the int8 form of ``AttentionSums``.

    torch's float32 ``bmm`` gives one sentence other last bits depending on how many
    sentences share the call (other kernels, other splits); in float64 those
    differences are ~1e-16 and vanish in the rounding, so a sentence gets the same
    numbers alone or batched."""

    @classmethod
    def from_float(cls, _sums: AttentionSums) -> "BatchInvariantSums":
        return cls()

    def operand(self, source: Tensor) -> Tensor:
        """Keys and values in float64 once per source (``AttentionSource.summed_by``); the
        fused kernel reads them as they are."""
        return source if backend.int8_loops() is not None else source.double()

    def product(self, a: Tensor, b: Tensor) -> Tensor:
        loops = backend.int8_loops(a, b)
        if loops is not None:
            return loops.attention_read(a, b)  # float64 sums in one fixed order, rounded back
        return torch.bmm(a.double(), b.double()).to(a.dtype)  # .double() of a float64 operand copies nothing

    def weights(self, query: Tensor, keys: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
        """Scores and softmax in float64 from end to end, rounded back once."""
        loops = backend.int8_loops(query, keys)
        if loops is not None:
            return loops.attention_weights(query, keys, padding_mask)
        return super().weights(query.double(), keys.double(), padding_mask).to(query.dtype)

    def precise(self, values: Tensor) -> Tensor:
        """float64: torch's vectorised and scalar log differ in the last bit, and which one
        a source position gets depends on the batch's source length."""
        return values.double()


class PreciseGatedLinearUnit(GatedLinearUnit):
    """v([A B]) = A ⊗ σ(B) in float64, rounded back once: the int8 form of ``GatedLinearUnit``.

    The gate feeds the next layer's int8 rounding, where a last-bit difference between
    engines' float32 sigmoids becomes a different int8 code; float64 makes them agree."""

    @classmethod
    def from_float(cls, _gate: GatedLinearUnit) -> "PreciseGatedLinearUnit":
        return cls()

    def forward(self, x: Tensor) -> Tensor:
        loops = backend.int8_loops(x)
        if loops is not None:
            return loops.gate(x)  # the same operations in two passes around torch's exp
        return self.forward_in_torch_operations(x)

    @staticmethod
    def forward_in_torch_operations(x: Tensor) -> Tensor:
        """The gate as torch operations: what an export traces, the reference the kernel
        (``int8_rows.cpp``) is tested against bit for bit, and its stand-in where it is not built."""
        a, b = x.double().chunk(2, dim=-1)
        return (a / (1.0 + torch.exp(-b))).to(x.dtype)  # σ as Exp and Div: onnxruntime's float64 Sigmoid is slow


def has_int8_weights(module: nn.Module) -> bool:
    """Whether any of ``module``'s weights are int8 (``swap_in_int8_modules_``, fconv-quantize)."""
    return any(isinstance(part, Int8Weight) for part in module.modules())


INT8_FORMS: Dict[type, Type[nn.Module]] = {
    AttentionSums: BatchInvariantSums,
    GatedLinearUnit: PreciseGatedLinearUnit,
    WeightNormLinear: Int8Linear,
    WeightNormConvTBC: Int8ConvTBC,
    CausalConvolution: Int8CausalConvolution,
    TokenEmbedding: Int8Embedding,
    LearnedPositionalEmbedding: Int8PositionalEmbedding,
}


def swap_in_int8_modules_(model: nn.Module, keep: Iterable[nn.Module] = ()) -> None:
    """Replace every float layer of ``model`` by its int8 form (``INT8_FORMS``), in place.

    Layers in ``keep`` stay float32. A layer reachable from two parents is replaced by
    one int8 module in both. Inference only: the int8 layers have no gradient path.
    """
    backend.announce()  # which int8 loops these layers will run: said once, where they are picked
    forms = {float_type: int8_type.from_float for float_type, int8_type in INT8_FORMS.items()}
    replace_layers_(model, forms, keep, must_have_form=(WeightNormalized, TokenEmbedding), form_name="int8")
