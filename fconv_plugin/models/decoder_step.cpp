// One step of the decoder (§3.2-3.3) compiled: models/decoder_steps.py's
// DecoderSteps.log_probs from the target embedding g_i to the log-probabilities.
//
// The same ATen calls run in the same order with the same arguments (addmm, cat, glu, bmm,
// masked_fill, softmax, the in-place scalings, log_softmax), and an int8 model's layers
// call the same compiled loops its Python form calls (int8_rows.cpp, through the table in
// int8_rows_api.h), so the log-probabilities are the Python step's bits
// (tests/models/test_decoder_steps.py runs both against the decoder's forward). What it
// saves is the Python between some 75 operations a step: ~10% of a float32 translation at
// beam 5 x 16 (benchmarks/step_overhead.py, docs/performance.md). The embeddings, the
// beams' reordering and a copying model's mixture stay in Python.
#include <torch/extension.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "int8_rows_api.h"

namespace {

const double kSqrtHalf = std::sqrt(0.5);  // Python's math.sqrt(0.5): the same double

// A layer as a function of a matrix of rows (its row_function): addmm(b, rows, w^T), or
// an int8 layer's compiled linear.
struct Rows {
  const fconv_int8::Api* int8 = nullptr;
  torch::Tensor weight;  // float32: w^T (in x out); int8: w (out x in)
  torch::Tensor bias, scale;
  c10::optional<torch::Tensor> packed, compensation;

  torch::Tensor operator()(const torch::Tensor& rows) const {
    if (int8 != nullptr) return int8->linear(rows, weight, scale, bias, packed, compensation);
    return at::addmm(bias, rows, weight);
  }
};

// One convolution block (§3.2), with its attention (§3.3) where it has one.
struct Block {
  Rows convolve;  // flattened windows (rows x k·in) to rows x 2·out
  int64_t history = 0;  // k - 1
  int64_t residual = 0;  // blocks back; 0: none
  c10::optional<Rows> project_residual;
  c10::optional<Rows> project_in, project_out;  // both where the block attends
};

const fconv_int8::Api* api_from(const py::object& capsule) {
  if (capsule.is_none()) return nullptr;
  auto table = capsule.cast<py::capsule>();
  TORCH_CHECK(table.name() != nullptr && std::string(table.name()) == fconv_int8::kApiCapsuleName,
              "not the int8 loops' table (fconv_plugin.modules._int8_rows.api)");
  return table.get_pointer<fconv_int8::Api>();
}

class Step {
 public:
  // precise: the int8 forms of the gate and of the attention's sums (float64, int8_rows.cpp,
  // whose table is int8_api); otherwise torch's float32 glu, bmm and softmax.
  Step(Rows fc1, std::vector<Block> blocks, Rows fc2, Rows fc3, const py::object& int8_api)
      : fc1_(std::move(fc1)), blocks_(std::move(blocks)), fc2_(std::move(fc2)), fc3_(std::move(fc3)),
        precise_(api_from(int8_api)) {
    for (const auto& block : blocks_) attending_ += block.project_in.has_value() ? 1 : 0;
  }

  // log p(y_{i+1} | y_1..y_i, x) for rows whose target embedding g_i (rows x embed) is
  // given. histories: each block's last k - 1 inputs (rows x (k-1)·in), or None. The
  // attention source as AttentionSource holds it: keys (b x embed x src), values
  // (b x src x embed), padding (b x src) or None, the length scale as a tensor
  // (b x 1 x 1) or else a number, and `copies` decoder rows per source row. Returns the
  // log-probabilities; when `attention`, the attention averaged over the layers
  // (rows x src); and the histories after this step.
  std::tuple<torch::Tensor, c10::optional<torch::Tensor>, std::vector<c10::optional<torch::Tensor>>> log_probs(
      const torch::Tensor& target_embedding, std::vector<c10::optional<torch::Tensor>> histories,
      const c10::optional<torch::Tensor>& keys, const c10::optional<torch::Tensor>& values,
      const c10::optional<torch::Tensor>& padding, const c10::optional<torch::Tensor>& length_scale_tensor,
      double length_scale, int64_t copies, bool attention) const {
    TORCH_CHECK(histories.size() == blocks_.size(), "one history (or None) per block");
    TORCH_CHECK(attending_ == 0 || (keys.has_value() && values.has_value()), "attention needs keys and values");
    torch::Tensor x = fc1_(target_embedding);
    std::vector<torch::Tensor> block_outputs{x};
    std::vector<torch::Tensor> attention_weights;
    for (size_t index = 0; index < blocks_.size(); ++index) {
      const Block& block = blocks_[index];
      c10::optional<torch::Tensor> residual;
      if (block.residual > 0) {
        residual = block_outputs[block_outputs.size() - block.residual];
        if (block.project_residual.has_value()) residual = (*block.project_residual)(*residual);
      }
      torch::Tensor window = x;
      if (block.history > 0) {
        TORCH_CHECK(histories[index].has_value(), "block ", index, " keeps a history");
        window = at::cat({*histories[index], x}, 1);
        histories[index] = window.slice(1, x.size(1));
      }
      x = precise_ != nullptr ? precise_->gate(block.convolve(window)) : at::glu(block.convolve(window), -1);
      if (block.project_in.has_value()) {  // AttentionLayer.attend, one target position
        torch::Tensor query = (*block.project_in)(x).add_(target_embedding).mul_(kSqrtHalf);
        const int64_t rows = query.size(0), embed = query.size(-1);
        query = query.reshape({rows / copies, copies, embed});
        torch::Tensor weights;
        if (precise_ != nullptr) {
          weights = precise_->attention_weights(query, *keys, padding);
        } else {  // AttentionSums.weights
          torch::Tensor scores = at::bmm(query, *keys);
          if (padding.has_value()) scores = scores.masked_fill(padding->unsqueeze(1), -INFINITY);
          weights = at::softmax(scores, -1);
        }
        weights = weights.view({rows, 1, -1});
        // AttentionSource.read
        const torch::Tensor grouped = copies > 1 ? weights.reshape({rows / copies, copies, -1}) : weights;
        torch::Tensor context =
            precise_ != nullptr ? precise_->attention_read(grouped, *values) : at::bmm(grouped, *values);
        context = length_scale_tensor.has_value() ? context * *length_scale_tensor : context * length_scale;
        context = context.view({rows, 1, -1}).view({rows, embed});
        x = (*block.project_out)(context).add_(x).mul_(kSqrtHalf);
        if (attention) attention_weights.push_back(weights);
      }
      if (residual.has_value()) x = (x + *residual).mul_(kSqrtHalf);  // add_residual
      block_outputs.push_back(x);
    }
    c10::optional<torch::Tensor> average;
    if (!attention_weights.empty()) {  // Python's sum(): 0 + a_1 + a_2 + ..., over the layers
      torch::Tensor sum = attention_weights[0] + 0;
      for (size_t l = 1; l < attention_weights.size(); ++l) sum = sum + attention_weights[l];
      average = (sum / attending_).select(1, 0);
    }
    // fairseq's get_normalized_probs
    return {at::log_softmax(fc3_(fc2_(x)), -1, torch::kFloat), std::move(average), std::move(histories)};
  }

 private:
  Rows fc1_;
  std::vector<Block> blocks_;
  Rows fc2_, fc3_;
  const fconv_int8::Api* precise_;
  int64_t attending_ = 0;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Rows>(m, "Rows", "a layer as a function of a matrix of rows")
      .def_static(
          "addmm",
          [](torch::Tensor bias, torch::Tensor weight_t) {
            Rows rows;
            rows.weight = std::move(weight_t);
            rows.bias = std::move(bias);
            return rows;
          },
          "rows -> addmm(bias, rows, weight_t)", py::arg("bias"), py::arg("weight_t"))
      .def_static(
          "int8",
          [](const py::object& api, torch::Tensor weight, torch::Tensor scale, torch::Tensor bias,
             c10::optional<torch::Tensor> packed, c10::optional<torch::Tensor> compensation) {
            Rows rows;
            rows.int8 = api_from(api);
            TORCH_CHECK(rows.int8 != nullptr, "an int8 layer needs the int8 loops' table");
            rows.weight = std::move(weight);
            rows.scale = std::move(scale);
            rows.bias = std::move(bias);
            rows.packed = std::move(packed);
            rows.compensation = std::move(compensation);
            return rows;
          },
          "rows -> the int8 loops' linear", py::arg("api"), py::arg("weight"), py::arg("scale"), py::arg("bias"),
          py::arg("packed"), py::arg("compensation"));
  py::class_<Block>(m, "Block", "one convolution block, with its attention where it has one")
      .def(py::init([](Rows convolve, int64_t history, int64_t residual, c10::optional<Rows> project_residual,
                       c10::optional<Rows> project_in, c10::optional<Rows> project_out) {
             TORCH_CHECK(project_in.has_value() == project_out.has_value(), "attention needs both projections");
             return Block{std::move(convolve), history, residual, std::move(project_residual), std::move(project_in),
                          std::move(project_out)};
           }),
           py::arg("convolve"), py::arg("history"), py::arg("residual"), py::arg("project_residual"),
           py::arg("project_in"), py::arg("project_out"));
  py::class_<Step>(m, "Step", "the decoder's step from the target embedding to the log-probabilities")
      .def(py::init<Rows, std::vector<Block>, Rows, Rows, const py::object&>(), py::arg("fc1"), py::arg("blocks"),
           py::arg("fc2"), py::arg("fc3"), py::arg("int8_api"))
      .def("log_probs", &Step::log_probs, py::arg("target_embedding"), py::arg("histories"), py::arg("keys"),
           py::arg("values"), py::arg("padding"), py::arg("length_scale_tensor"), py::arg("length_scale"),
           py::arg("copies"), py::arg("attention"));
}
