// training_limits.py part 7's candidate, compiled by the benchmark on the machine it measures
// (torch's cpp_extension, -march=native): the log-softmax over the vocabulary from bfloat16
// logits, one pass over memory each way, against torch's four (cast to float32, log-softmax,
// its backward, cast back). Not part of the plugin: it measures whether a second form of the
// loss path could pay 10% of the training step.
//
//   forward:  log p = x - max(x) - log sum exp(x - max(x)), bfloat16 x read once, float32 out
//   backward: dx = g - exp(log p) * sum(g), float32 g and log p read once, bfloat16 dx out
//             (rounded to nearest even, as torch's cast)
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include "bf16_rows.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

using candidate::exp_of;
using candidate::from_bf16;
using candidate::to_bf16;

constexpr int64_t kRowsPerTask = 16;

}  // namespace

torch::Tensor log_softmax_forward(const torch::Tensor& logits) {
  TORCH_CHECK(logits.dim() == 2 && logits.scalar_type() == torch::kBFloat16 && logits.is_contiguous(),
              "rows x vocabulary bfloat16 logits, contiguous");
  const int64_t rows = logits.size(0), vocabulary = logits.size(1);
  torch::Tensor out = torch::empty({rows, vocabulary}, logits.options().dtype(torch::kFloat));
  const uint16_t* in = reinterpret_cast<const uint16_t*>(logits.data_ptr());
  float* written = out.data_ptr<float>();
  at::parallel_for(0, rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const uint16_t* x = in + row * vocabulary;
      float* y = written + row * vocabulary;
      float largest = -INFINITY;
#pragma omp simd reduction(max : largest)
      for (int64_t j = 0; j < vocabulary; ++j) largest = std::max(largest, from_bf16(x[j]));
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < vocabulary; ++j) {
        float shifted = from_bf16(x[j]) - largest;
        y[j] = shifted;
        sum += exp_of(shifted);
      }
      const float log_sum = std::log(sum);
#pragma omp simd
      for (int64_t j = 0; j < vocabulary; ++j) y[j] -= log_sum;
    }
  });
  return out;
}

torch::Tensor log_softmax_backward(const torch::Tensor& grad, const torch::Tensor& log_probs) {
  TORCH_CHECK(grad.dim() == 2 && grad.sizes() == log_probs.sizes() && grad.scalar_type() == torch::kFloat &&
                  log_probs.scalar_type() == torch::kFloat && grad.is_contiguous() && log_probs.is_contiguous(),
              "float32 gradient and log-probabilities, rows x vocabulary, contiguous");
  const int64_t rows = grad.size(0), vocabulary = grad.size(1);
  torch::Tensor out = torch::empty({rows, vocabulary}, grad.options().dtype(torch::kBFloat16));
  const float* g_all = grad.data_ptr<float>();
  const float* p_all = log_probs.data_ptr<float>();
  uint16_t* written = reinterpret_cast<uint16_t*>(out.data_ptr());
  at::parallel_for(0, rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* g = g_all + row * vocabulary;
      const float* log_p = p_all + row * vocabulary;
      uint16_t* dx = written + row * vocabulary;
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < vocabulary; ++j) sum += g[j];
#pragma omp simd
      for (int64_t j = 0; j < vocabulary; ++j) dx[j] = to_bf16(g[j] - exp_of(log_p[j]) * sum);
    }
  });
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &log_softmax_forward, "float32 log-softmax of bfloat16 logits (rows x vocabulary)");
  m.def("backward", &log_softmax_backward, "its gradient, in bfloat16");
}
