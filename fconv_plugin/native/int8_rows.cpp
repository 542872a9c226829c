// The loops of deployment/int8.py compiled: the int8 linear layer in one call (rows quantised,
// multiplied, scaled back), and the attention's batch-invariant float64 sums (below).
//
// Int8Weight.linear in torch is a dozen small kernels around one integer product (absolute
// value, row maximum, clamp, two divisions, rounding, conversion; then two scalings). At
// the sizes of beam search on a CPU (5 to a few hundred rows of 256 to 768 values) each
// kernel costs more in dispatch than in arithmetic, and the products themselves are 3-10x
// cheaper in int8 than in float32. Here the rows are quantised in one pass, multiplied by
// torch's own int8 product (at::_int_mm, exact int32 sums), and scaled back in one pass; or,
// over a weight packed once, by AMX tiles of its own where the CPU has them, or else, for a
// decoding step's few rows, by AVX-512 VNNI loops of its own (below: the same exact sums).
//
// The arithmetic is the torch form's, element by element, so both give the same bits
// (tests/deployment/test_int8.py): scale_r = max(max_j |x_rj|, 1e-12) / 127, q_rj =
// round-half-even(x_rj / scale_r); y_rn = bias_n + (float(sum_rn) * scale_r) * w_scale_n,
// the last step one fused multiply-add (std::fma, one rounding, as torch's vectorised
// addcmul computes it), every other operation rounded on its own (-ffp-contract=off). Every
// value of row r depends on row r alone, so a sentence's answer never depends on the
// sentences batched with it.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/Parallel.h>

#include "apis.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <initializer_list>
#include <utility>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

constexpr float kQuantizedMax = 127.0f;
constexpr float kSmallestMax = 1e-12f;  // torch: clamp_min_(1e-12) of a float32 tensor
constexpr int64_t kValuesPerTask = 32768;  // at::parallel_for's grain (torch's own), in values

int64_t rows_per_task(int64_t cols) { return std::max<int64_t>(1, kValuesPerTask / std::max<int64_t>(1, cols)); }

// For loops bound by a division per value (the quantisation, the gate): both threads from 4096 values.
int64_t rows_per_dividing_task(int64_t cols) { return std::max<int64_t>(1, rows_per_task(cols) / 8); }

// Each loop is compiled twice (FCONV_DISPATCHED / FCONV_DISPATCHED_AS below): for AVX2 with
// FMA (x86-64 since 2013), chosen at run time where the CPU has them, and for the baseline; the
// attention's sums a third time, for AVX-512 (rows_times_matrix_512). All give the same bits (no implicit
// contraction but in the attention's sums, whose products are exact; the one fma explicit).
#define FCONV_INLINE static inline __attribute__((always_inline))

// scale_r = max(max_j |x_rj|, 1e-12) / 127 of one row.
FCONV_INLINE float quantization_scale(const float* __restrict x, int64_t n) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // lane-wise maxima: max is exact in any order
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int k = 0; k < 8; ++k) {
      const float a = std::fabs(x[j + k]);
      partial[k] = a > partial[k] ? a : partial[k];
    }
  }
  float largest = 0.0f;
  for (int k = 0; k < 8; ++k) largest = partial[k] > largest ? partial[k] : largest;
  for (; j < n; ++j) largest = std::fabs(x[j]) > largest ? std::fabs(x[j]) : largest;
  return (largest > kSmallestMax ? largest : kSmallestMax) / kQuantizedMax;
}

FCONV_INLINE void quantize_row_body(const float* __restrict x, int64_t n, int8_t* __restrict q,
                                    float* __restrict scale_out) {
  const float scale = quantization_scale(x, n);
  for (int64_t j = 0; j < n; ++j) q[j] = static_cast<int8_t>(std::nearbyint(x[j] / scale));
  *scale_out = scale;
}

FCONV_INLINE void scale_back_row_body(const int32_t* __restrict sums, int64_t n, float row_scale,
                                      const float* __restrict column_scale, const float* __restrict bias,
                                      float* __restrict y) {
  if (bias != nullptr) {
    for (int64_t j = 0; j < n; ++j) {
      const float scaled = static_cast<float>(sums[j]) * row_scale;
      y[j] = std::fma(scaled, column_scale[j], bias[j]);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = static_cast<float>(sums[j]) * row_scale * column_scale[j];
  }
}

// out_ri = sum_o c_ro m_oi in float64, o in order, for R rows of c at once: row vectors times one
// matrix. The attention's scores (c = queries, m = keys: embed x source) and its read (c =
// weights, m = values: source x embed) are both this, and a sentence's hypotheses (beam search's
// rows) share its m. Every out_ri is the same sum in the same order as one row alone would get
// (an exact product, then an addition rounded: fused or not, the same bits), so blocking the rows
// changes no bit; it reads each m_oi once for R rows, and keeps 8 outputs of each row (16
// with 512-bit registers) in registers across the whole sum.
typedef double Doubles8 __attribute__((vector_size(64)));
typedef float Floats8 __attribute__((vector_size(32), aligned(4)));  // may be unaligned

// Outputs i.. of the R rows, 8·V at a time (V registers of 8 doubles per row where the CPU
// has 512-bit registers, twice V of 4 where it has 256-bit ones); returns where it stopped.
template <int R, int V>
FCONV_INLINE int64_t row_block_outputs(const double* __restrict c, const float* __restrict m, int64_t inner,
                                       int64_t outer, int64_t i, double* __restrict out) {
  for (; i + 8 * V <= outer; i += 8 * V) {
    Doubles8 sums[R][V];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) sums[r][v] = Doubles8{0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (int64_t o = 0; o < inner; ++o) {
      Doubles8 m_o[V];
      for (int v = 0; v < V; ++v)
        m_o[v] = __builtin_convertvector(*reinterpret_cast<const Floats8*>(m + o * outer + i + 8 * v), Doubles8);
      for (int r = 0; r < R; ++r) {
        const double c_ro = c[r * inner + o];
        for (int v = 0; v < V; ++v) sums[r][v] += c_ro * m_o[v];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v)
        for (int k = 0; k < 8; ++k) out[r * outer + i + 8 * v + k] = sums[r][v][k];
  }
  return i;
}

template <int R, int V>
FCONV_INLINE void row_block_times_matrix(const float* __restrict c_rows, int64_t c_stride, const float* __restrict m,
                                         int64_t inner, int64_t outer, double* __restrict out) {
  std::vector<double> c_block(R * inner);  // the rows' c in float64 once, not once per 8 outputs
  double* __restrict c = c_block.data();
  for (int r = 0; r < R; ++r)
    for (int64_t o = 0; o < inner; ++o) c[r * inner + o] = c_rows[r * c_stride + o];
  int64_t i = row_block_outputs<R, V>(c, m, inner, outer, 0, out);
  if (V > 1) i = row_block_outputs<R, 1>(c, m, inner, outer, i, out);
  if (i == outer) return;
  // The last outer % 8 outputs (a source length's remainder) through the same 8-wide loop, on
  // their columns of m copied beside zeros: the same sums in the same order.
  const int64_t remaining = outer - i;
  std::vector<float> m_tail(inner * 8, 0.0f);
  for (int64_t o = 0; o < inner; ++o)
    for (int64_t k = 0; k < remaining; ++k) m_tail[o * 8 + k] = m[o * outer + i + k];
  double tail_out[R * 8];
  row_block_outputs<R, 1>(c, m_tail.data(), inner, 8, 0, tail_out);
  for (int r = 0; r < R; ++r)
    for (int64_t k = 0; k < remaining; ++k) out[r * outer + i + k] = tail_out[r * 8 + k];
}

constexpr int kRowsAtOnce = 5;  // a beam of 5 (the paper's) in one block: 10 of AVX2's 16 registers

template <int V>
FCONV_INLINE void rows_times_matrix_of_width(const float* c, int64_t c_stride, const float* m, int64_t inner,
                                             int64_t outer, int rows, double* out) {
  switch (rows) {
    case 1: row_block_times_matrix<1, V>(c, c_stride, m, inner, outer, out); break;
    case 2: row_block_times_matrix<2, V>(c, c_stride, m, inner, outer, out); break;
    case 3: row_block_times_matrix<3, V>(c, c_stride, m, inner, outer, out); break;
    case 4: row_block_times_matrix<4, V>(c, c_stride, m, inner, outer, out); break;
    default: row_block_times_matrix<kRowsAtOnce, V>(c, c_stride, m, inner, outer, out); break;
  }
}

FCONV_INLINE void rows_times_matrix_256_body(const float* c, int64_t c_stride, const float* m, int64_t inner,
                                         int64_t outer, int rows, double* out) {
  rows_times_matrix_of_width<1>(c, c_stride, m, inner, outer, rows, out);
}

// The gate v([A B]) = A / (1 + e) of int8 models (PreciseGatedLinearUnit), given e = exp(-B)
// computed by torch: a float64 division, rounded once to float32.
FCONV_INLINE void negated_gate_half_body(const float* __restrict x, int64_t half, double* __restrict negated) {
  for (int64_t j = 0; j < half; ++j) negated[j] = -static_cast<double>(x[half + j]);
}

FCONV_INLINE void gated_row_body(const float* __restrict x, const double* __restrict exp_negated, int64_t half,
                                 float* __restrict y) {
  for (int64_t j = 0; j < half; ++j) y[j] = static_cast<float>(static_cast<double>(x[j]) / (1.0 + exp_negated[j]));
}

#if defined(__x86_64__) && defined(__GNUC__)
const bool kAvx2Fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
const bool kAvx512 = kAvx2Fma && __builtin_cpu_supports("avx512f");
#define FCONV_AVX2 __attribute__((target("avx2,fma")))
#define FCONV_AVX512 __attribute__((target("avx2,fma,avx512f")))
#else
constexpr bool kAvx2Fma = false;
constexpr bool kAvx512 = false;
#define FCONV_AVX2
#define FCONV_AVX512
#endif

// NAME: NAME_body compiled for AVX2 with FMA (with AVX2_ATTRIBUTES) and for the baseline, chosen by the CPU
#define FCONV_DISPATCHED_AS(NAME, AVX2_ATTRIBUTES, PARAMS, ARGS) \
  void NAME##_baseline PARAMS { NAME##_body ARGS; }              \
  AVX2_ATTRIBUTES void NAME##_avx2 PARAMS { NAME##_body ARGS; }   \
  void NAME PARAMS { kAvx2Fma ? NAME##_avx2 ARGS : NAME##_baseline ARGS; }
#define FCONV_DISPATCHED(NAME, PARAMS, ARGS) FCONV_DISPATCHED_AS(NAME, FCONV_AVX2, PARAMS, ARGS)

FCONV_DISPATCHED(quantize_row, (const float* x, int64_t n, int8_t* q, float* scale), (x, n, q, scale))
FCONV_DISPATCHED(scale_back_row,
                 (const int32_t* sums, int64_t n, float row_scale, const float* column_scale, const float* bias, float* y),
                 (sums, n, row_scale, column_scale, bias, y))
// The sums' product of two float32 values is exact in float64 (24 + 24 significand bits of
// 53), so a fused multiply-add rounds exactly where the product-then-addition does: the
// AVX2 and AVX-512 loops contract them (FCONV_CONTRACTED), half the instructions, the same bits.
#define FCONV_CONTRACTED __attribute__((optimize("fp-contract=fast")))
FCONV_DISPATCHED_AS(rows_times_matrix_256, FCONV_AVX2 FCONV_CONTRACTED,
                    (const float* c, int64_t c_stride, const float* m, int64_t inner, int64_t outer, int rows, double* out),
                    (c, c_stride, m, inner, outer, rows, out))

// The attention's float64 sums with 512-bit registers where the CPU has them: 16 outputs of
// each row at a time instead of 8, every output the same sum in the same order (the same bits).
FCONV_AVX512 FCONV_CONTRACTED void rows_times_matrix_512(const float* c, int64_t c_stride, const float* m,
                                                         int64_t inner, int64_t outer, int rows, double* out) {
  rows_times_matrix_of_width<2>(c, c_stride, m, inner, outer, rows, out);
}

bool wide_registers = kAvx512;  // the 512-bit loops where the CPU has them; tests switch to compare

void rows_times_matrix(const float* c, int64_t c_stride, const float* m, int64_t inner, int64_t outer, int rows,
                       double* out) {
  wide_registers ? rows_times_matrix_512(c, c_stride, m, inner, outer, rows, out)
                 : rows_times_matrix_256(c, c_stride, m, inner, outer, rows, out);
}
FCONV_DISPATCHED(negated_gate_half, (const float* x, int64_t half, double* negated), (x, half, negated))
FCONV_DISPATCHED(gated_row, (const float* x, const double* exp_negated, int64_t half, float* y), (x, exp_negated, half, y))


// --- int8 products with AVX-512 VNNI, for the few rows of a decoding step ---
//
// torch's int8 product (at::_int_mm, oneDNN) costs about 10 us a call whatever its size, which
// at a decoding step's 5 to 80 rows is most of a 256 x 256 layer's time. Where the CPU has
// AVX-512 VNNI (vpdpbusd: four unsigned x signed byte products added to each int32 lane), those
// rows are multiplied here instead, in registers, and scaled back before they are stored. The
// sums are exact integers either way, so the bits are at::_int_mm's.
//
// vpdpbusd's first operand is unsigned, so a row is quantised as u = q + 128 (q in [-127, 127])
// and sum_k u_k w_nk - 128 sum_k w_nk = sum_k q_k w_nk, the second sum (the compensation) kept
// per output with the packed weight. Both sums may leave int32 in very wide layers; they wrap
// (vpdpbusd and AMX add without saturating), and their difference is still exact, since the
// true sum fits (|sum_k q_k w_nk| <= 127^2 · in < 2^31; tested at 70,000 inputs). The weight
// is packed once (pack_weight): for each block of 16 outputs and each group of 4 inputs, 64
// bytes, output-major, the 4 inputs of an output together, as one vpdpbusd reads them against
// a row's 4 inputs broadcast.
constexpr int64_t kOutputsPerBlock = 16;  // int32 lanes of a 512-bit register
constexpr int64_t kInputsPerGroup = 4;  // bytes summed into a lane by one vpdpbusd
constexpr int32_t kUnsignedOffset = 128;

int64_t input_groups(int64_t in) { return (in + kInputsPerGroup - 1) / kInputsPerGroup; }
int64_t output_blocks(int64_t out) { return (out + kOutputsPerBlock - 1) / kOutputsPerBlock; }

#if defined(__x86_64__) && defined(__GNUC__)
const bool kVnni = kAvx512 && __builtin_cpu_supports("avx512vnni");
#define FCONV_VNNI __attribute__((target("avx2,fma,avx512f,avx512vnni")))
#define FCONV_HAS_VNNI_LOOPS 1
constexpr int kTileRows = 4, kTileBlocks = 4;  // 16 accumulators of the 32 registers

// The row quantised as quantize_row does it, stored as q + 128, padded with q = 0 to whole groups;
// 16 values at a time. The same bits as quantize_row: the largest |x| is exact in any order
// (_mm512_max_ps(a, m) is a > m ? a : m, so a NaN is passed over as quantization_scale passes
// it), the division is IEEE's either way, and the conversion rounds to nearest even as
// std::nearbyint does in the default rounding mode. (The scalar form's max did not vectorise:
// 6% of an int8 translation at one thread, docs/performance.md.)
#pragma GCC diagnostic push
// GCC 12 warns on its own intrinsics here too (they start from _mm512_undefined_*)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
FCONV_VNNI void quantize_row_unsigned(const float* __restrict x, int64_t n, int64_t padded, uint8_t* __restrict u,
                                      float* __restrict scale_out) {
  __m512 largest = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) largest = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + j)), largest);
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - j)) - 1);  // the rest, zeros beside it
  largest = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(tail, x + j)), largest);
  const float row_max = _mm512_reduce_max_ps(largest);
  const float scale = (row_max > kSmallestMax ? row_max : kSmallestMax) / kQuantizedMax;
  const __m512 scales = _mm512_set1_ps(scale);
  const __m512i offset = _mm512_set1_epi32(kUnsignedOffset);
  for (j = 0; j + 16 <= n; j += 16) {
    const __m512i q = _mm512_cvtps_epi32(_mm512_div_ps(_mm512_loadu_ps(x + j), scales));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(u + j), _mm512_cvtepi32_epi8(_mm512_add_epi32(q, offset)));
  }
  const __m512i q = _mm512_cvtps_epi32(_mm512_div_ps(_mm512_maskz_loadu_ps(tail, x + j), scales));
  _mm512_mask_cvtepi32_storeu_epi8(u + j, tail, _mm512_add_epi32(q, offset));
  for (j = n; j < padded; ++j) u[j] = kUnsignedOffset;
  *scale_out = scale;
}
#pragma GCC diagnostic pop

// What a product's tiles read and write: the rows as quantize_row_unsigned stores them, the
// packed weight (pack_weight), and the output.
struct VnniProduct {
  const uint8_t* rows;  // rows x row_stride, q + 128
  int64_t row_stride;  // inputs padded to whole groups
  const float* row_scales;
  const int8_t* packed;  // output blocks x groups x 64
  int64_t groups;
  const int32_t* compensation;  // 128 · sum_k w_nk, padded to whole blocks
  const float* column_scale;
  const float* bias;  // or nullptr
  int64_t outputs;
  float* y;  // rows x outputs

  int64_t block_bytes() const { return groups * kOutputsPerBlock * kInputsPerGroup; }
};

// One block of 16 outputs scaled back as scale_back_row does it (float(sum) * row scale, then one
// fma with the column scale and the bias) and stored, the outputs past the last one masked off.
struct ScaleBack {
  int64_t output;
  __mmask16 lanes;
  __m512i offset;
  __m512 columns, added;

  FCONV_VNNI ScaleBack(const VnniProduct& p, int64_t block) : output(block * kOutputsPerBlock) {
    lanes = static_cast<__mmask16>((1u << std::min<int64_t>(kOutputsPerBlock, p.outputs - output)) - 1);
    offset = _mm512_loadu_si512(p.compensation + output);
    columns = _mm512_maskz_loadu_ps(lanes, p.column_scale + output);
    added = p.bias == nullptr ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(lanes, p.bias + output);
  }

#pragma GCC diagnostic push
// GCC 12 warns on its own _mm512_cvtepi32_ps (which starts from _mm512_undefined_ps)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  FCONV_VNNI void store(const VnniProduct& p, int64_t row, __m512i sums) const {
    const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sums, offset)),
                                        _mm512_set1_ps(p.row_scales[row]));
    const __m512 out = p.bias == nullptr ? _mm512_mul_ps(scaled, columns) : _mm512_fmadd_ps(scaled, columns, added);
    _mm512_mask_storeu_ps(p.y + row * p.outputs + output, lanes, out);
  }
#pragma GCC diagnostic pop
};

// Rows [first, first + R) times output blocks [block, block + C), summed over every input
// group, then scaled back and stored.
template <int R, int C>
FCONV_VNNI void vnni_tile(const VnniProduct& p, int64_t first, int64_t block) {
  const uint8_t* __restrict rows = p.rows + first * p.row_stride;
  const int8_t* __restrict weights = p.packed + block * p.block_bytes();
  __m512i sums[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) sums[r][c] = _mm512_setzero_si512();
  for (int64_t g = 0; g < p.groups; ++g) {
    __m512i w[C];
    for (int c = 0; c < C; ++c) w[c] = _mm512_loadu_si512(weights + c * p.block_bytes() + g * 64);
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, rows + r * p.row_stride + g * kInputsPerGroup, sizeof four);
      const __m512i inputs = _mm512_set1_epi32(four);
      for (int c = 0; c < C; ++c) sums[r][c] = _mm512_dpbusd_epi32(sums[r][c], inputs, w[c]);
    }
  }
  for (int c = 0; c < C; ++c) {
    const ScaleBack block_out(p, block + c);
    for (int r = 0; r < R; ++r) block_out.store(p, first + r, sums[r][c]);
  }
}

template <int C>
void vnni_tile_of_blocks(const VnniProduct& p, int64_t first, int rows, int64_t block) {
  switch (rows) {
    case 1: vnni_tile<1, C>(p, first, block); break;
    case 2: vnni_tile<2, C>(p, first, block); break;
    case 3: vnni_tile<3, C>(p, first, block); break;
    default: vnni_tile<kTileRows, C>(p, first, block); break;
  }
}

// Output blocks [first_block, last_block) of every row, 4 blocks at a time over all rows (the
// 4 blocks' weights stay in the core's first-level cache while the rows pass).
void vnni_blocks(const VnniProduct& p, int64_t rows, int64_t first_block, int64_t last_block) {
  for (int64_t block = first_block; block < last_block; block += kTileBlocks) {
    const int64_t blocks = std::min<int64_t>(kTileBlocks, last_block - block);
    for (int64_t first = 0; first < rows; first += kTileRows) {
      const int count = static_cast<int>(std::min<int64_t>(kTileRows, rows - first));
      switch (blocks) {
        case 1: vnni_tile_of_blocks<1>(p, first, count, block); break;
        case 2: vnni_tile_of_blocks<2>(p, first, count, block); break;
        case 3: vnni_tile_of_blocks<3>(p, first, count, block); break;
        default: vnni_tile_of_blocks<kTileBlocks>(p, first, count, block); break;
      }
    }
  }
}

// --- the same products with AMX, where the CPU has it (Xeon since Sapphire Rapids) ---
//
// AMX multiplies tiles: 16 rows of 64 unsigned bytes (16 rows of the quantised x, 64 inputs) by
// 16 rows of 64 signed bytes (16 groups of 4 inputs for 16 outputs: one output block's 16 groups
// in the packed weight, as they lie), adding into 16 x 16 int32 sums, 16 times vpdpbusd's work
// in one instruction. The sums are the same exact integers, stored from the tiles and scaled back
// as above. Used where the inputs fill whole tiles (a multiple of 64) and Linux lets the process
// use the tile registers (it must ask, once).
#define FCONV_AMX __attribute__((target("avx2,fma,avx512f,avx512vnni,amx-tile,amx-int8")))
constexpr int64_t kTileInputs = 64;  // bytes of a tile row
constexpr int kAmxRows = 16;  // rows of a tile
constexpr int kAmxBlocks = 4;  // output blocks summed at once: tiles 0-3; x in tile 4, the weight in 5-7
constexpr int64_t kChunkBytes = kTileInputs / kInputsPerGroup * kOutputsPerBlock * kInputsPerGroup;  // a weight tile

bool amx_permitted() {
  static const bool permitted = kVnni && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
                                syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                                        18 /* XFEATURE_XTILEDATA */) == 0;
  return permitted;
}
bool use_amx = true;  // tests switch it off to compare with the VNNI loops
bool amx_runs(int64_t in) { return use_amx && amx_permitted() && input_groups(in) * kInputsPerGroup % kTileInputs == 0; }

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Output blocks [first_block, last_block) of every row (the rows padded to whole tiles in p.rows).
FCONV_AMX void amx_blocks(const VnniProduct& p, int64_t rows, int64_t first_block, int64_t last_block) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = kTileInputs;
    config.rows[t] = kAmxRows;
  }
  _tile_loadconfig(&config);
  alignas(64) int32_t sums[kAmxBlocks][kAmxRows][kOutputsPerBlock];
  const int64_t chunks = p.groups * kInputsPerGroup / kTileInputs, block_bytes = p.block_bytes();
  for (int64_t block = first_block; block < last_block; block += kAmxBlocks) {
    const int blocks = static_cast<int>(std::min<int64_t>(kAmxBlocks, last_block - block));
    for (int64_t first = 0; first < rows; first += kAmxRows) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        _tile_loadd(4, p.rows + first * p.row_stride + chunk * kTileInputs, p.row_stride);
        const int8_t* w = p.packed + block * block_bytes + chunk * kChunkBytes;
        _tile_loadd(5, w, kTileInputs);
        _tile_dpbusd(0, 4, 5);
        if (blocks > 1) {
          _tile_loadd(6, w + block_bytes, kTileInputs);
          _tile_dpbusd(1, 4, 6);
        }
        if (blocks > 2) {
          _tile_loadd(7, w + 2 * block_bytes, kTileInputs);
          _tile_dpbusd(2, 4, 7);
        }
        if (blocks > 3) {
          _tile_loadd(5, w + 3 * block_bytes, kTileInputs);
          _tile_dpbusd(3, 4, 5);
        }
      }
      _tile_stored(0, sums[0], kOutputsPerBlock * sizeof(int32_t));
      if (blocks > 1) _tile_stored(1, sums[1], kOutputsPerBlock * sizeof(int32_t));
      if (blocks > 2) _tile_stored(2, sums[2], kOutputsPerBlock * sizeof(int32_t));
      if (blocks > 3) _tile_stored(3, sums[3], kOutputsPerBlock * sizeof(int32_t));
      const int present = static_cast<int>(std::min<int64_t>(kAmxRows, rows - first));
      for (int c = 0; c < blocks; ++c) {
        const ScaleBack block_out(p, block + c);
        for (int r = 0; r < present; ++r) block_out.store(p, first + r, _mm512_load_si512(sums[c][r]));
      }
    }
  }
  _tile_release();
}

#else
constexpr bool kVnni = false;
bool amx_permitted() { return false; }
bool use_amx = false;
bool amx_runs(int64_t) { return false; }
#endif  // VNNI

}  // namespace

// The loops read CPU memory: a tensor elsewhere gets this error, not a crash.
void check_on_cpu(std::initializer_list<const torch::Tensor*> tensors) {
  for (const torch::Tensor* t : tensors)
    TORCH_CHECK(!t->defined() || t->device().is_cpu(),
                "int8 models run on the CPU (their compiled loops read CPU memory); add --cpu");
}

// Each row of x (rows x in, float32, contiguous) as int8 with its own scale: (q, scale).
std::vector<torch::Tensor> quantize_rows(const torch::Tensor& x) {
  check_on_cpu({&x});
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "quantize_rows takes a contiguous float32 matrix");
  const int64_t rows = x.size(0), cols = x.size(1);
  auto q = torch::empty({rows, cols}, x.options().dtype(torch::kChar));
  auto scale = torch::empty({rows, 1}, x.options());
  const float* in = x.data_ptr<float>();
  int8_t* out = q.data_ptr<int8_t>();
  float* scales = scale.data_ptr<float>();
  at::parallel_for(0, rows, rows_per_dividing_task(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) quantize_row(in + r * cols, cols, out + r * cols, scales + r);
  });
  return {q, scale};
}

// Whether a product's output is wide enough (the vocabulary's) to be split by columns.
bool wide_output(int64_t in, int64_t out) { return out >= 8 * in; }

// How many blocks a product is split into, one per thread. One (torch's own threading inside
// the product) below about a million multiply-adds, where threads cost more than they save, and
// above about a hundred million but for a wide output, where torch's threads do as well.
// (Chosen from timings on 2 cores at 80, 200 and 400 rows, in docs/performance.md.)
int64_t thread_blocks(int64_t rows, int64_t in, int64_t out) {
  constexpr int64_t kSplitFrom = 1 << 20, kSplitUpTo = 100 << 20;
  const int64_t threads = at::get_num_threads(), work = rows * in * out;
  if (threads <= 1 || at::in_parallel_region() || work < kSplitFrom || (work > kSplitUpTo && !wide_output(in, out)))
    return 1;
  return std::max<int64_t>(1, std::min<int64_t>(threads, wide_output(in, out) ? out / 64 : rows / 8));
}

// [first, last) of block ``block`` of ``blocks`` over ``n``, cut at multiples of ``step``.
std::pair<int64_t, int64_t> block_range(int64_t block, int64_t blocks, int64_t n, int64_t step) {
  const auto cut = [&](int64_t b) { return b == blocks ? n : b * n / blocks / step * step; };
  return {cut(block), cut(block + 1)};
}

// The int8 weight (out x in) as the VNNI loops read it: {packed (output blocks x input groups x 64
// bytes, zero-padded), compensation (128 · sum_k w_nk per output, padded to whole blocks)}.
std::vector<torch::Tensor> pack_weight(const torch::Tensor& weight) {
  check_on_cpu({&weight});
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kChar, "pack_weight takes an int8 weight (out x in)");
  const auto w = weight.contiguous();
  const int64_t out = w.size(0), in = w.size(1), blocks = output_blocks(out), groups = input_groups(in);
  auto packed = torch::zeros({blocks, groups, kOutputsPerBlock * kInputsPerGroup}, w.options());
  auto compensation = torch::zeros({blocks * kOutputsPerBlock}, w.options().dtype(torch::kInt));
  const int8_t* from = w.data_ptr<int8_t>();
  int8_t* to = packed.data_ptr<int8_t>();
  int32_t* offsets = compensation.data_ptr<int32_t>();
  for (int64_t n = 0; n < out; ++n) {
    const int64_t block = n / kOutputsPerBlock, lane = n % kOutputsPerBlock;
    int32_t total = 0;
    for (int64_t k = 0; k < in; ++k) {
      const int64_t group = k / kInputsPerGroup, byte = lane * kInputsPerGroup + k % kInputsPerGroup;
      to[(block * groups + group) * kOutputsPerBlock * kInputsPerGroup + byte] = from[n * in + k];
      total += from[n * in + k];
    }
    offsets[n] = static_cast<int32_t>(static_cast<uint32_t>(kUnsignedOffset) * static_cast<uint32_t>(total));  // wraps
  }
  return {packed, compensation};
}

// A packed weight's product runs on AMX tiles where they run, at any number of rows (faster than
// torch's product from 5 to 1,280 rows at the model's shapes). The VNNI loops take up to this many
// rows, more for a wide output such as the vocabulary's (a decoding step's rows); above them
// torch's product (oneDNN) is faster. From this many multiply-adds the output blocks are split
// across threads. (Chosen from benchmarks/int8_products.py on 2 cores of a Xeon with AMX,
// docs/performance.md.)
constexpr int64_t kVnniRowsUpTo = 48, kVnniWideRowsUpTo = 128;
constexpr int64_t kVnniSplitFrom = 1 << 21, kAmxSplitFrom = 1 << 23;

bool packed_runs(int64_t rows, int64_t in, int64_t out, const c10::optional<torch::Tensor>& packed) {
  return kVnni && packed.has_value() && packed->defined() &&
         (amx_runs(in) || rows <= (wide_output(in, out) ? kVnniWideRowsUpTo : kVnniRowsUpTo));
}

#ifdef FCONV_HAS_VNNI_LOOPS
// linear's product by the packed weight: rows quantised as q + 128, then summed by AMX tiles
// where they run (the inputs a multiple of 64) or else by the VNNI loops, scaled back and
// stored; the same bits as the product by at::_int_mm and scale_back_row.
void packed_linear(const torch::Tensor& rows_in, const torch::Tensor& packed, const torch::Tensor& compensation,
                   const float* column_scale, const float* bias, torch::Tensor& y) {
  const int64_t rows = rows_in.size(0), in = rows_in.size(1), out = y.size(1), groups = input_groups(in);
  TORCH_CHECK(packed.dim() == 3 && packed.scalar_type() == torch::kChar && packed.is_contiguous() &&
                  packed.size(0) == output_blocks(out) && packed.size(1) == groups &&
                  compensation.scalar_type() == torch::kInt && compensation.is_contiguous() &&
                  compensation.numel() == packed.size(0) * kOutputsPerBlock,
              "the packed weight's shape does not match this weight's; pack this weight with pack_weight");
  const bool tiles = amx_runs(in);
  const int64_t stride = groups * kInputsPerGroup;
  const int64_t stored_rows = tiles ? (rows + kAmxRows - 1) / kAmxRows * kAmxRows : rows;  // whole tiles
  std::unique_ptr<uint8_t[]> quantized(new uint8_t[stored_rows * stride]);  // each row written once below
  std::fill(quantized.get() + rows * stride, quantized.get() + stored_rows * stride, kUnsignedOffset);  // q = 0
  std::vector<float> row_scales(rows);
  const float* x = rows_in.data_ptr<float>();
  at::parallel_for(0, rows, rows_per_dividing_task(in), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      quantize_row_unsigned(x + r * in, in, stride, quantized.get() + r * stride, &row_scales[r]);
  });
  const VnniProduct product{quantized.get(), stride, row_scales.data(), packed.data_ptr<int8_t>(),
                            groups, compensation.data_ptr<int32_t>(), column_scale, bias, out, y.data_ptr<float>()};
  const auto blocks_of = [&](int64_t first_block, int64_t last_block) {
    tiles ? amx_blocks(product, rows, first_block, last_block) : vnni_blocks(product, rows, first_block, last_block);
  };
  const int64_t blocks = output_blocks(out);
  if (at::get_num_threads() <= 1 || at::in_parallel_region() || rows * in * out < (tiles ? kAmxSplitFrom : kVnniSplitFrom)) {
    blocks_of(0, blocks);
    return;
  }
  const int64_t per_thread = (blocks + at::get_num_threads() - 1) / at::get_num_threads();
  at::parallel_for(0, blocks, per_thread, [&](int64_t begin, int64_t end) { blocks_of(begin, end); });
}
#endif

// x (rows x in, float32) times the int8 weight w (out x in) with per-row scales
// w_scale (out), plus bias (out, or an empty tensor): rows x out, float32.
//
// Large products run as one block per thread, each multiplied by torch's int8 product on that
// thread alone and scaled back by the thread that wrote its sums, in its own cache. (One
// product over both threads, scaled back afterwards, reads half its sums from the other core's
// cache, which cost more than the scaling.) The blocks are rows (each thread quantises its
// own), or for a wide output such as the vocabulary's, columns (each thread reads half the
// weight). Each row's arithmetic is its own and integer sums are exact, so no split changes a bit.
// at::_int_mm(a, b): exact int32 sums; for one input (a k = 1 product) each sum is one
// product, taken as such: at::_int_mm's sums are wrong there (torch 2.13 on the CPU).
torch::Tensor int_products(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.size(1) == 1) return at::mul(a.to(torch::kInt), b.to(torch::kInt));
  return at::_int_mm(a, b);
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& weight_scale,
                     const c10::optional<torch::Tensor>& bias, const c10::optional<torch::Tensor>& packed,
                     const c10::optional<torch::Tensor>& compensation) {
  check_on_cpu({&x, &weight, &weight_scale});
  if (bias.has_value()) check_on_cpu({&*bias});
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
              "linear takes x (rows x in) and an int8 weight (out x in)");
  TORCH_CHECK(weight.scalar_type() == torch::kChar && weight_scale.scalar_type() == torch::kFloat,
              "the weight is int8 with float32 scales");
  const auto rows_in = x.scalar_type() == torch::kFloat ? x.contiguous() : x.to(torch::kFloat).contiguous();
  const int64_t rows = rows_in.size(0), in_features = rows_in.size(1), cols = weight.size(0);
  const auto column_scale = weight_scale.contiguous();
  torch::Tensor bias_values;
  if (bias.has_value() && bias->defined()) {
    bias_values = bias->to(torch::kFloat).contiguous();
    TORCH_CHECK(bias_values.numel() == cols, "the bias has one value per output");
  }
  auto y = torch::empty({rows, cols}, rows_in.options());
  const float* columns = column_scale.data_ptr<float>();
  const float* added = bias_values.defined() ? bias_values.data_ptr<float>() : nullptr;
  float* out = y.data_ptr<float>();
#ifdef FCONV_HAS_VNNI_LOOPS
  if (packed_runs(rows, in_features, cols, packed)) {
    TORCH_CHECK(compensation.has_value() && compensation->defined(), "a packed weight comes with its compensation");
    packed_linear(rows_in, *packed, *compensation, columns, added, y);
    return y;
  }
#endif
  const int64_t blocks = thread_blocks(rows, in_features, cols);
  if (blocks == 1) {
    const auto quantized = quantize_rows(rows_in);
    const float* row_scales = quantized[1].data_ptr<float>();
    const auto sums = int_products(quantized[0], weight.t()).contiguous();  // exact int32 sums
    const int32_t* in = sums.data_ptr<int32_t>();
    at::parallel_for(0, rows, rows_per_task(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) scale_back_row(in + r * cols, cols, row_scales[r], columns, added, out + r * cols);
    });
    return y;
  }
  if (wide_output(in_features, cols)) {  // a block of columns per thread
    const auto quantized = quantize_rows(rows_in);
    const float* row_scales = quantized[1].data_ptr<float>();
    at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; ++block) {
        const auto [first, last] = block_range(block, blocks, cols, 16);
        const auto sums = int_products(quantized[0], weight.slice(0, first, last).t()).contiguous();  // this thread only
        const int32_t* in = sums.data_ptr<int32_t>();
        for (int64_t r = 0; r < rows; ++r)
          scale_back_row(in + r * (last - first), last - first, row_scales[r], columns + first,
                         added == nullptr ? nullptr : added + first, out + r * cols + first);
      }
    });
    return y;
  }
  // a block of rows per thread, quantised by that thread
  auto quantized = torch::empty({rows, in_features}, rows_in.options().dtype(torch::kChar));
  std::vector<float> row_scales(rows);
  const float* x_data = rows_in.data_ptr<float>();
  int8_t* q_data = quantized.data_ptr<int8_t>();
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const auto [first, last] = block_range(block, blocks, rows, 1);
      for (int64_t r = first; r < last; ++r)
        quantize_row(x_data + r * in_features, in_features, q_data + r * in_features, &row_scales[r]);
      const auto sums = int_products(quantized.slice(0, first, last), weight.t()).contiguous();  // this thread only
      const int32_t* in = sums.data_ptr<int32_t>();
      for (int64_t r = first; r < last; ++r)
        scale_back_row(in + (r - first) * cols, cols, row_scales[r], columns, added, out + r * cols);
    }
  });
  return y;
}

// Multi-step attention's sums over the source (§3.3) for int8 models, batch-invariant by
// construction: each row's sums run in float64 in one fixed order (over the embedding for
// the scores, over the source positions for the read), whatever the batch, and are rounded
// to float32 once. What BatchInvariantSums computes with torch's float64 bmm and softmax,
// to its rounding, without converting keys and values to float64.

// Rows are taken kRowsAtOnce at a time within one batch entry (a sentence's hypotheses, which
// share its keys and values); a task is one such block.
template <typename Block>
void for_each_row_block(int64_t batch, int64_t rows, int64_t values_per_row, const Block& block) {
  const int64_t blocks_per_entry = (rows + kRowsAtOnce - 1) / kRowsAtOnce;
  const int64_t grain = std::max<int64_t>(1, kValuesPerTask / std::max<int64_t>(1, kRowsAtOnce * values_per_row));
  at::parallel_for(0, batch * blocks_per_entry, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / blocks_per_entry, first = (task % blocks_per_entry) * kRowsAtOnce;
      block(b, first, static_cast<int>(std::min<int64_t>(kRowsAtOnce, rows - first)));
    }
  });
}

// a_ij = softmax_j(q_i . k_j) for query (batch x rows x embed) and keys (batch x embed x
// source), float32; padding (batch x source, True at padding) or an undefined tensor.
torch::Tensor attention_weights(const torch::Tensor& query, const torch::Tensor& keys,
                                const c10::optional<torch::Tensor>& padding) {
  check_on_cpu({&query, &keys});
  if (padding.has_value()) check_on_cpu({&*padding});
  TORCH_CHECK(query.dim() == 3 && keys.dim() == 3 && query.size(0) == keys.size(0) && query.size(2) == keys.size(1),
              "attention_weights takes query (b x rows x embed) and keys (b x embed x source)");
  TORCH_CHECK(query.scalar_type() == torch::kFloat && keys.scalar_type() == torch::kFloat, "float32 query and keys");
  const auto q = query.contiguous();
  const auto k = keys.contiguous();
  const int64_t batch = q.size(0), rows = q.size(1), embed = q.size(2), length = k.size(2);
  torch::Tensor mask;
  if (padding.has_value() && padding->defined()) {
    mask = padding->to(torch::kBool).contiguous();
    TORCH_CHECK(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == length, "padding is batch x source");
  }
  auto weights = torch::empty({batch, rows, length}, q.options());
  const float* q_data = q.data_ptr<float>();
  const float* k_data = k.data_ptr<float>();
  const bool* mask_data = mask.defined() ? mask.data_ptr<bool>() : nullptr;
  float* out = weights.data_ptr<float>();
  for_each_row_block(batch, rows, embed * length, [&](int64_t b, int64_t first, int count) {
    std::vector<double> block_scores(kRowsAtOnce * length);
    rows_times_matrix(q_data + (b * rows + first) * embed, embed, k_data + b * embed * length, embed, length, count,
                      block_scores.data());
    for (int r = 0; r < count; ++r) {
      double* scores = block_scores.data() + r * length;
      double largest = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < length; ++j) {
        if (mask_data != nullptr && mask_data[b * length + j]) scores[j] = -std::numeric_limits<double>::infinity();
        largest = scores[j] > largest ? scores[j] : largest;
      }
      double total = 0.0;
      for (int64_t j = 0; j < length; ++j) {
        scores[j] = std::exp(scores[j] - largest);  // every position padding: NaN, as torch's softmax
        total += scores[j];
      }
      float* w = out + (b * rows + first + r) * length;
      for (int64_t j = 0; j < length; ++j) w[j] = static_cast<float>(scores[j] / total);
    }
  });
  return weights;
}

// c_i = sum_j a_ij v_j for weights (batch x rows x source) and values (batch x source x embed), float32.
torch::Tensor attention_read(const torch::Tensor& weights, const torch::Tensor& values) {
  check_on_cpu({&weights, &values});
  TORCH_CHECK(weights.dim() == 3 && values.dim() == 3 && weights.size(0) == values.size(0) &&
                  weights.size(2) == values.size(1),
              "attention_read takes weights (b x rows x source) and values (b x source x embed)");
  TORCH_CHECK(weights.scalar_type() == torch::kFloat && values.scalar_type() == torch::kFloat,
              "float32 weights and values");
  const auto a = weights.contiguous();
  const auto v = values.contiguous();
  const int64_t batch = a.size(0), rows = a.size(1), length = a.size(2), embed = v.size(2);
  auto context = torch::empty({batch, rows, embed}, a.options());
  const float* a_data = a.data_ptr<float>();
  const float* v_data = v.data_ptr<float>();
  float* out = context.data_ptr<float>();
  for_each_row_block(batch, rows, embed * length, [&](int64_t b, int64_t first, int count) {
    std::vector<double> sums(kRowsAtOnce * embed);
    rows_times_matrix(a_data + (b * rows + first) * length, length, v_data + b * length * embed, length, embed, count,
                      sums.data());
    float* c = out + (b * rows + first) * embed;
    for (int64_t e = 0; e < count * embed; ++e) c[e] = static_cast<float>(sums[e]);
  });
  return context;
}

// The convolution blocks' gate of int8 models (PreciseGatedLinearUnit, §3.2): v([A B]) =
// A / (1 + exp(-B)) in float64 over the last dimension of x (float32), rounded once. exp is
// torch's own (at::exp over the rows' -B laid out contiguously, as the torch form's
// torch.exp(-b) is), so the bits are the torch form's; the rest is one pass each way
// instead of seven float64 tensors.
torch::Tensor gate(const torch::Tensor& x) {
  check_on_cpu({&x});
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0 && x.scalar_type() == torch::kFloat,
              "gate takes float32 values with an even last dimension");
  const auto in = x.contiguous();
  const int64_t half = in.size(-1) / 2, rows = half == 0 ? 0 : in.numel() / (2 * half);
  std::vector<int64_t> shape(in.sizes().begin(), in.sizes().end());
  shape.back() = half;
  auto negated = torch::empty(shape, in.options().dtype(torch::kDouble));
  const float* x_data = in.data_ptr<float>();
  double* negated_data = negated.data_ptr<double>();
  const int64_t grain = rows_per_dividing_task(half);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) negated_gate_half(x_data + r * 2 * half, half, negated_data + r * half);
  });
  const auto exp_negated = at::exp(negated);
  auto y = torch::empty(shape, in.options());
  const double* e_data = exp_negated.data_ptr<double>();
  float* y_data = y.data_ptr<float>();
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) gated_row(x_data + r * 2 * half, e_data + r * half, half, y_data + r * half);
  });
  return y;
}

// Rows of an int8 table as float32 (Int8Weight.embedding, §3.1's word and position
// embeddings): out[.., d] = float(q[i, d]) * scale[i], one rounded multiplication each, as
// the torch form's two lookups, conversion and product compute it; one pass instead of four
// kernels.
torch::Tensor embedding(const torch::Tensor& indices, const torch::Tensor& weight, const torch::Tensor& scale) {
  check_on_cpu({&indices, &weight, &scale});
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kChar && weight.is_contiguous() &&
                  scale.scalar_type() == torch::kFloat && scale.is_contiguous() && scale.numel() == weight.size(0),
              "embedding takes an int8 table (rows x dim) and one float32 scale per row");
  TORCH_CHECK(indices.scalar_type() == torch::kLong, "embedding takes int64 indices");
  const auto ids = indices.contiguous();
  const int64_t n = ids.numel(), dim = weight.size(1), table_rows = weight.size(0);
  const int64_t* id = ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK_INDEX(id[i] >= 0 && id[i] < table_rows, "index ", id[i], " is out of range for a table of ",
                      table_rows, " rows");
  std::vector<int64_t> shape(ids.sizes().begin(), ids.sizes().end());
  shape.push_back(dim);
  auto out = torch::empty(shape, scale.options());
  const int8_t* table = weight.data_ptr<int8_t>();
  const float* scales = scale.data_ptr<float>();
  float* out_data = out.data_ptr<float>();
  at::parallel_for(0, n, rows_per_task(dim), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int8_t* row = table + id[i] * dim;
      const float row_scale = scales[id[i]];
      float* o = out_data + i * dim;
      for (int64_t d = 0; d < dim; ++d) o[d] = static_cast<float>(row[d]) * row_scale;
    }
  });
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("quantize_rows", &quantize_rows, "each row of a float32 matrix as int8 with its own scale");
  m.def("linear", &linear, "x times an int8 weight with per-row scales, plus bias; x's rows quantised each on its own",
        py::arg("x"), py::arg("weight"), py::arg("weight_scale"), py::arg("bias"), py::arg("packed") = py::none(),
        py::arg("compensation") = py::none());
  m.def("pack_weight", &pack_weight, "an int8 weight as linear's VNNI loops read it: (packed, compensation)");
  m.attr("vnni") = kVnni;
  m.def("amx", [] { return amx_permitted(); }, "whether the packed products run on AMX tiles here");
  m.def("use_amx", [](bool amx) {
    const bool before = use_amx;
    use_amx = amx;
    return before;
  }, "the packed products on AMX tiles (where they run) or by the VNNI loops; returns the setting before");  // whether linear multiplies a step's rows by a packed weight with AVX-512 VNNI
  m.def("attention_weights", &attention_weights, "softmax of query . keys over the source, float64 sums, batch-invariant");
  m.def("attention_read", &attention_read, "weights times values, float64 sums, batch-invariant");
  m.attr("avx2_fma") = kAvx2Fma;  // which compiled form of the loops runs here
  m.attr("avx512") = kAvx512;  // the attention's sums with 512-bit registers
  m.def("use_wide_registers", [](bool wide) {
    const bool before = wide_registers;
    wide_registers = wide && kAvx512;
    return before;
  }, "the attention's sums with 512-bit registers (where the CPU has them) or 256-bit ones; returns the setting before");
  m.def("embedding", &embedding, "rows of an int8 table with per-row scales, as float32");
  m.def("gate", &gate, "the GLU A / (1 + exp(-B)) in float64, rounded once: the torch form's bits");
  static const fconv_int8::Api api{&linear, &attention_weights, &attention_read, &gate, &embedding};
  m.attr("api") = py::capsule(&api, fconv_int8::kApiCapsuleName);  // for the compiled decoder step
}
