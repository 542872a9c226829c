// What the compiled loops hand each other, as tables of functions in capsules (each
// module's attribute "api"), so that one loop calls another without Python between them:
// - the int8 layers' loops (int8_rows.cpp), one copy of them and of their settings (AMX,
//   register width) for Python and the compiled decoder step (decoder_step.cpp) alike;
// - the compiled decoding (decoder_step.cpp), which beam_candidates.cpp's run_steps steps.
#pragma once

#include <Python.h>
#include <torch/types.h>

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

namespace fconv_decoding {

constexpr const char* kApiCapsuleName = "fconv_plugin.native._decoder_step.api";

struct Api {
  // the state held by a Python object of decoder_step's Decoding class; null for any other object
  void* (*decoding_of)(PyObject* object);
  // row r of the state becomes row order[r] (Decoding.reorder)
  void (*reorder)(void* decoding, const torch::Tensor& order);
  // the step's log-probabilities for the newest tokens at a position (Decoding.log_probs, no attention)
  torch::Tensor (*log_probs)(void* decoding, const torch::Tensor& last_tokens, int64_t position);
};

}  // namespace fconv_decoding
