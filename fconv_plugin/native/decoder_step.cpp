// One step of the decoder (§3.2-3.3) compiled: models/decoder_steps.py's
// DecoderSteps.log_probs from the target embedding g_i to the log-probabilities.
//
// The same ATen calls run in the same order with the same arguments (addmm, cat, glu, bmm,
// masked_fill, softmax, the in-place scalings, log_softmax), and an int8 model's layers
// call the same compiled loops its Python form calls (int8_rows.cpp, through the table in
// apis.h), so the log-probabilities are the Python step's bits
// (tests/models/test_decoder_steps.py runs both against the decoder's forward). What it
// saves is the Python between some 75 operations a step: with beam_candidates.cpp's whole
// steps, 1.12-1.30x an int8 translation's speed at beam 5 x 16, 1.02-1.21x a float32 one's
// (benchmarks/native_loops.py, docs/performance.md). A search's state (each
// block's history, the attention source) is held here too (Decoding), so that a step is one
// call from the newest tokens: their embeddings (§3.1) looked up here, the histories
// reordered here as the beams move. A copying model's mixture stays in Python.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "apis.h"

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

// An embedding table (§3.1) as a function of indices: float32 rows, or an int8 table's
// rows with their scales (the int8 loops' embedding).
struct Table {
  const fconv_int8::Api* int8 = nullptr;
  torch::Tensor weight, scale;

  torch::Tensor operator()(const torch::Tensor& indices) const {
    if (int8 != nullptr) return int8->embedding(indices, weight, scale);
    return at::embedding(weight, indices);
  }
};

// What the attention reads (AttentionSource): keys (b x embed x src), values
// (b x src x embed), padding (b x src) or none, the length scale as a tensor (b x 1 x 1)
// or else a number, and `copies` decoder rows per source row.
struct Source {
  c10::optional<torch::Tensor> keys, values, padding, length_scale_tensor;
  double length_scale = 0.0;
  int64_t copies = 1;
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
              "not the int8 loops' table (fconv_plugin.native._int8_rows.api)");
  return table.get_pointer<fconv_int8::Api>();
}

// A block's window over the last k inputs, rows x (k-1)·in + in: row r is history row
// order[r] (or r) followed by x's row r. One pass: at::cat's values after index_select's,
// without the reordered history in between (beam search reorders every step).
torch::Tensor window_of(const torch::Tensor& history, const torch::Tensor& x,
                        const c10::optional<torch::Tensor>& order) {
  if (!order.has_value()) return at::cat({history, x}, 1);
  TORCH_CHECK(history.dim() == 2 && x.dim() == 2 && history.scalar_type() == x.scalar_type() &&
                  history.scalar_type() == torch::kFloat && history.stride(1) == 1,
              "a float32 history (rows x (k-1)·in, its rows contiguous) and rows x in");
  const auto rows_in = x.contiguous();
  const auto chosen = order->to(torch::kLong).contiguous();
  const int64_t rows = rows_in.size(0), kept = history.size(1), width = kept + rows_in.size(1);
  TORCH_CHECK(chosen.dim() == 1 && chosen.numel() == rows, "one history row per row of x");
  auto window = torch::empty({rows, width}, rows_in.options());
  const float* old = history.data_ptr<float>();
  const float* newest = rows_in.data_ptr<float>();
  const int64_t* from = chosen.data_ptr<int64_t>();
  float* out = window.data_ptr<float>();
  const int64_t history_rows = history.size(0), stride = history.stride(0);
  for (int64_t r = 0; r < rows; ++r) {
    TORCH_CHECK_INDEX(from[r] >= 0 && from[r] < history_rows, "order names row ", from[r], " of ", history_rows);
    std::copy(old + from[r] * stride, old + from[r] * stride + kept, out + r * width);
    std::copy(newest + r * rows_in.size(1), newest + (r + 1) * rows_in.size(1), out + r * width + kept);
  }
  return window;
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
  // given. histories: each block's last k - 1 inputs (rows x (k-1)·in), or none, of the
  // rows `order` names (row r's are the histories' row order[r]; none: row r's); replaced
  // by the histories after this step. Returns the log-probabilities and, when `attention`,
  // the attention averaged over the layers (rows x src).
  std::tuple<torch::Tensor, c10::optional<torch::Tensor>> log_probs(
      const torch::Tensor& target_embedding, std::vector<c10::optional<torch::Tensor>>& histories,
      const c10::optional<torch::Tensor>& order, const Source& source, bool attention) const {
    const auto &keys = source.keys, &values = source.values, &padding = source.padding;
    const auto& length_scale_tensor = source.length_scale_tensor;
    const double length_scale = source.length_scale;
    const int64_t copies = source.copies;
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
        window = window_of(*histories[index], x, order);
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
    return {at::log_softmax(fc3_(fc2_(x)), -1, torch::kFloat), std::move(average)};
  }

  size_t block_count() const { return blocks_.size(); }

 private:
  Rows fc1_;
  std::vector<Block> blocks_;
  Rows fc2_, fc3_;
  const fconv_int8::Api* precise_;
  int64_t attending_ = 0;
};

// One search's decoding state for a Step (DecodingState where the step runs compiled):
// each block's history and the attention source, so that a step is one call from the newest
// tokens, and a reordering one call too.
class Decoding {
 public:
  Decoding(std::shared_ptr<const Step> step, Table tokens, c10::optional<Table> positions,
           std::vector<c10::optional<torch::Tensor>> histories)
      : step_(std::move(step)), tokens_(std::move(tokens)), positions_(std::move(positions)),
        histories_(std::move(histories)) {
    TORCH_CHECK(histories_.size() == step_->block_count(), "one history (or None) per block");
  }

  void set_source(c10::optional<torch::Tensor> keys, c10::optional<torch::Tensor> values,
                  c10::optional<torch::Tensor> padding, c10::optional<torch::Tensor> length_scale_tensor,
                  double length_scale, int64_t copies) {
    TORCH_CHECK(copies >= 1, "at least one decoder row per source row");
    source_ = Source{std::move(keys), std::move(values), std::move(padding), std::move(length_scale_tensor),
                     length_scale, copies};
  }

  // Row r of every history becomes row order[r] of the old (beam search's choice): taken
  // when the next step builds its windows.
  void reorder(const torch::Tensor& order) {
    order_ = order_.has_value() ? order_->index_select(0, order) : order;
  }

  // The step for rows whose newest tokens are `last_tokens` (rows), at position number
  // `position` (as make_positions numbers them; the same for every row, as a beam search's
  // prefixes hold no padding): g = w + p (§3.1), then Step.log_probs.
  std::tuple<torch::Tensor, c10::optional<torch::Tensor>> log_probs(const torch::Tensor& last_tokens,
                                                                   int64_t position, bool attention) {
    TORCH_CHECK(last_tokens.dim() == 1 && last_tokens.scalar_type() == torch::kLong, "one int64 token per row");
    torch::Tensor x = tokens_(last_tokens);
    if (positions_.has_value()) {  // one row, the same for all: broadcast, the same sums as a row each
      x = x + (*positions_)(torch::full({1}, position, last_tokens.options()));
    }
    auto result = step_->log_probs(x, histories_, order_, source_, attention);
    order_.reset();
    return result;
  }

  // Another search's state from here on: the same step, source and histories so far.
  Decoding copy() const { return *this; }

 private:
  std::shared_ptr<const Step> step_;
  Table tokens_;
  c10::optional<Table> positions_;
  std::vector<c10::optional<torch::Tensor>> histories_;
  c10::optional<torch::Tensor> order_;  // the reordering the histories await
  Source source_;
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
  py::class_<Step, std::shared_ptr<Step>>(m, "Step",
                                          "the decoder's step from the target embedding to the log-probabilities")
      .def(py::init<Rows, std::vector<Block>, Rows, Rows, const py::object&>(), py::arg("fc1"), py::arg("blocks"),
           py::arg("fc2"), py::arg("fc3"), py::arg("int8_api"));
  py::class_<Table>(m, "Table", "an embedding table as a function of indices")
      .def_static(
          "float32",
          [](torch::Tensor weight) {
            TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kFloat, "a float32 table (rows x dim)");
            Table table;
            table.weight = std::move(weight);
            return table;
          },
          "rows of a float32 table", py::arg("weight"))
      .def_static(
          "int8",
          [](const py::object& api, torch::Tensor weight, torch::Tensor scale) {
            Table table;
            table.int8 = api_from(api);
            TORCH_CHECK(table.int8 != nullptr, "an int8 table needs the int8 loops' table");
            table.weight = std::move(weight);
            table.scale = std::move(scale);
            return table;
          },
          "rows of an int8 table with per-row scales, as float32", py::arg("api"), py::arg("weight"),
          py::arg("scale"));
  // the table beam_candidates.cpp's run_steps calls (apis.h): whole steps without Python
  static const fconv_decoding::Api api{
      [](PyObject* object) -> void* {
        const py::handle handle(object);
        return py::isinstance<Decoding>(handle) ? static_cast<void*>(&handle.cast<Decoding&>()) : nullptr;
      },
      [](void* decoding, const torch::Tensor& order) { static_cast<Decoding*>(decoding)->reorder(order); },
      [](void* decoding, const torch::Tensor& last_tokens, int64_t position) {
        return std::get<0>(static_cast<Decoding*>(decoding)->log_probs(last_tokens, position, false));
      }};
  m.attr("api") = py::capsule(&api, fconv_decoding::kApiCapsuleName);
  py::class_<Decoding>(m, "Decoding", "one search's decoding state for a Step: histories and attention source")
      .def(py::init([](std::shared_ptr<Step> step, Table tokens, c10::optional<Table> positions,
                       std::vector<c10::optional<torch::Tensor>> histories) {
             return Decoding(std::move(step), std::move(tokens), std::move(positions), std::move(histories));
           }),
           py::arg("step"), py::arg("tokens"), py::arg("positions"), py::arg("histories"))
      .def("set_source", &Decoding::set_source, py::arg("keys"), py::arg("values"), py::arg("padding"),
           py::arg("length_scale_tensor"), py::arg("length_scale"), py::arg("copies"))
      // without the GIL: a step is C++ and ATen throughout, so searches in other threads go on meanwhile
      .def("reorder", &Decoding::reorder, py::arg("order"), py::call_guard<py::gil_scoped_release>())
      .def("log_probs", &Decoding::log_probs, py::arg("last_tokens"), py::arg("position"), py::arg("attention"),
           py::call_guard<py::gil_scoped_release>())
      .def("copy", &Decoding::copy);
}
