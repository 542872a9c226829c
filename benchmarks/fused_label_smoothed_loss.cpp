// training_limits.py part 7's second candidate, compiled by the benchmark with the compiled loops'
// own flags (the form the plugin would ship; one copy of the row's arithmetic per vector width,
// chosen at load, where GCC 12 or later builds it for glibc): fairseq's label-smoothed
// cross-entropy of bfloat16 logits (rows x vocabulary) and its gradient, in one pass over each row,
// against torch's six passes over float32 copies (the cast, the log-softmax, the target's gather and
// the smoothing's sum, their gradients, the cast back). Label smoothing: Szegedy et al. 2016, the
// loss Gehring et al. 2017 train with (section 5.1). Not part of the plugin: it measures whether a
// compiled criterion would pay 10% of the training step.
//
// For a row with target t over V words, lse = log sum_j exp(x_j), eps_i = epsilon / (V - 1):
//   nll    = lse - x_t
//   loss   = (1 - epsilon - eps_i) * nll + eps_i * (V * lse - sum_j x_j)
//   d loss / d x_j = softmax_j - eps_i - (1 - epsilon - eps_i) [j = t]
// (the softmax's coefficients sum to 1). Rows whose target is ignore_index add nothing and get a
// zero gradient. The sums are taken per row in float32 and over rows in float64; the gradient is
// rounded to bfloat16 (to nearest even), as torch's cast of the float32 gradient is.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include "bf16_rows.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

// one copy of the row's arithmetic per vector width, chosen when the module loads (GCC's function
// multi-versioning, with these names from GCC 12; the resolver needs glibc's ifunc): the loops' flags
// target any x86-64, whose vectors are four floats wide, which is what other compilers build
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__GLIBC__)
#define FCONV_VECTOR_WIDTHS __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FCONV_VECTOR_WIDTHS
#endif

namespace {

using candidate::exp_of;
using candidate::from_bf16;
using candidate::to_bf16;

struct RowLoss {
  double loss;
  double nll;
};

// One row: its loss and nll, and (gradient != nullptr) d loss / d x into gradient. scratch holds V floats.
FCONV_VECTOR_WIDTHS
RowLoss row_loss(const uint16_t* x, int64_t vocabulary, int64_t target, float epsilon_i, float on_target,
                 float* scratch, uint16_t* gradient) {
  float largest = -INFINITY, total = 0.f;
#pragma omp simd reduction(max : largest) reduction(+ : total)
  for (int64_t j = 0; j < vocabulary; ++j) {
    const float value = from_bf16(x[j]);
    largest = std::max(largest, value);
    total += value;
  }
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < vocabulary; ++j) {
    const float e = exp_of(from_bf16(x[j]) - largest);
    scratch[j] = e;
    sum += e;
  }
  const float log_sum = largest + std::log(sum);
  const double nll = static_cast<double>(log_sum) - from_bf16(x[target]);
  const double smooth = static_cast<double>(vocabulary) * log_sum - total;
  if (gradient != nullptr) {
    const float inverse = 1.f / sum;
#pragma omp simd
    for (int64_t j = 0; j < vocabulary; ++j) gradient[j] = to_bf16(scratch[j] * inverse - epsilon_i);
    gradient[target] = to_bf16(scratch[target] * inverse - epsilon_i - on_target);
  }
  return {on_target * nll + epsilon_i * smooth, nll};
}

constexpr int64_t kRowsPerTask = 16;

}  // namespace

// (loss, nll) summed over the rows (float64), and the gradient of the loss (bfloat16, rows x V) where asked
// (else an empty tensor).
std::vector<torch::Tensor> label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                                               double epsilon, int64_t ignore_index, bool with_gradient) {
  TORCH_CHECK(logits.dim() == 2 && logits.scalar_type() == torch::kBFloat16 && logits.is_contiguous(),
              "label_smoothed_loss: rows x vocabulary bfloat16 logits, contiguous");
  TORCH_CHECK(target.dim() == 1 && target.scalar_type() == torch::kLong && target.is_contiguous() &&
                  target.size(0) == logits.size(0),
              "label_smoothed_loss: one int64 target per row");
  const int64_t rows = logits.size(0), vocabulary = logits.size(1);
  TORCH_CHECK(vocabulary >= 2, "label_smoothed_loss: a vocabulary of at least two words");
  const int64_t* targets = target.data_ptr<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    TORCH_CHECK(targets[row] == ignore_index || (targets[row] >= 0 && targets[row] < vocabulary),
                "label_smoothed_loss: target ", targets[row], " outside the vocabulary of ", vocabulary);
  }
  const float epsilon_i = static_cast<float>(epsilon / (vocabulary - 1));
  const float on_target = static_cast<float>(1.0 - epsilon - epsilon / (vocabulary - 1));
  torch::Tensor gradient = with_gradient ? torch::empty({rows, vocabulary}, logits.options()) : torch::Tensor();
  const uint16_t* in = reinterpret_cast<const uint16_t*>(logits.data_ptr());
  uint16_t* out = with_gradient ? reinterpret_cast<uint16_t*>(gradient.data_ptr()) : nullptr;
  std::vector<double> losses(rows, 0.0), nlls(rows, 0.0);
  at::parallel_for(0, rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(vocabulary);
    for (int64_t row = begin; row < end; ++row) {
      uint16_t* row_gradient = out == nullptr ? nullptr : out + row * vocabulary;
      if (targets[row] == ignore_index) {
        if (row_gradient != nullptr) std::memset(row_gradient, 0, vocabulary * sizeof(uint16_t));
        continue;
      }
      const RowLoss result = row_loss(in + row * vocabulary, vocabulary, targets[row], epsilon_i, on_target,
                                      scratch.data(), row_gradient);
      losses[row] = result.loss;
      nlls[row] = result.nll;
    }
  });
  double loss = 0.0, nll = 0.0;  // in row order: the same sums for any number of threads
  for (int64_t row = 0; row < rows; ++row) {
    loss += losses[row];
    nll += nlls[row];
  }
  return {torch::tensor({loss, nll}, torch::kFloat64), gradient};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("label_smoothed_loss", &label_smoothed_loss,
        "fairseq's label-smoothed loss and nll of bfloat16 logits, summed, and the loss's bfloat16 gradient");
}
