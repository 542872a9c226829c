// The int8 layers' compiled loops (int8_rows.cpp) as other compiled code calls them: the
// module _int8_rows hands this table out as a capsule (its attribute "api"), so that one
// copy of the loops and of their settings (AMX, register width) serves Python and the
// compiled decoder step (native/decoder_step.cpp) alike.
#pragma once

#include <torch/extension.h>

namespace fconv_int8 {

constexpr const char* kApiCapsuleName = "fconv_plugin.native._int8_rows.api";

struct Api {
  // rows times an int8 weight with per-row scales, plus bias (Int8Weight.linear)
  torch::Tensor (*linear)(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& weight_scale,
                          const c10::optional<torch::Tensor>& bias, const c10::optional<torch::Tensor>& packed,
                          const c10::optional<torch::Tensor>& compensation);
  // softmax of query . keys over the source in float64 (BatchInvariantSums.weights)
  torch::Tensor (*attention_weights)(const torch::Tensor& query, const torch::Tensor& keys,
                                     const c10::optional<torch::Tensor>& padding);
  // weights times values in float64 (BatchInvariantSums.product)
  torch::Tensor (*attention_read)(const torch::Tensor& weights, const torch::Tensor& values);
  // the GLU in float64 (PreciseGatedLinearUnit)
  torch::Tensor (*gate)(const torch::Tensor& x);
  // rows of an int8 table with per-row scales, as float32 (Int8Weight.embedding)
  torch::Tensor (*embedding)(const torch::Tensor& indices, const torch::Tensor& weight, const torch::Tensor& scale);
};

}  // namespace fconv_int8
