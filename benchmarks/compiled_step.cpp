// benchmarks/step_overhead.py's "compiled step": models/decoder_steps.py's float32 step
// (DecoderSteps.log_probs from the target embedding g_i to the log-probabilities) written
// with the same ATen calls, in the same order, with the same arguments, but no Python
// between them. It measures what leaving Python would save, and nothing else: the
// operations are the Python step's, so are the bits. Written for the models
// step_overhead.py takes (attention in every block, residuals one block back, no residual
// projections, no pointer-generator). Compiled by step_overhead.py when it runs
// (torch.utils.cpp_extension.load); not part of the package.
#include <torch/extension.h>

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

namespace {

const double kSqrtHalf = std::sqrt(0.5);  // Python's math.sqrt(0.5): the same double

struct Rows {  // a row_function of WeightNormLinear or CausalConvolution: rows -> addmm(b, rows, w^T)
  torch::Tensor bias, weight_t;
  torch::Tensor operator()(const torch::Tensor& rows) const { return at::addmm(bias, rows, weight_t); }
};

struct Block {  // one convolution block (section 3.2) with its attention (section 3.3)
  Rows convolve, project_in, project_out;
  int64_t history;  // k - 1
};

class Step {
 public:
  Step(Rows fc1, std::vector<Block> blocks, Rows fc2, Rows fc3)
      : fc1_(std::move(fc1)), blocks_(std::move(blocks)), fc2_(std::move(fc2)), fc3_(std::move(fc3)) {}

  // DecoderSteps.log_probs after the embeddings: the log-probabilities and the histories
  // after this step. The source as AttentionSource holds it, its length scale a number.
  std::tuple<torch::Tensor, std::vector<torch::Tensor>> log_probs(const torch::Tensor& target_embedding,
                                                                  std::vector<torch::Tensor> histories,
                                                                  const torch::Tensor& keys, const torch::Tensor& values,
                                                                  double length_scale, int64_t copies) const {
    torch::Tensor x = fc1_(target_embedding);
    for (size_t index = 0; index < blocks_.size(); ++index) {
      const Block& block = blocks_[index];
      const torch::Tensor residual = x;
      torch::Tensor window = x;
      if (block.history > 0) {
        window = at::cat({histories[index], x}, 1);
        histories[index] = window.slice(1, x.size(1));
      }
      x = at::glu(block.convolve(window), -1);  // GatedLinearUnit
      // AttentionLayer.attend with AttentionSums, one target position
      torch::Tensor query = block.project_in(x).add_(target_embedding).mul_(kSqrtHalf);
      const int64_t rows = query.size(0), embed = query.size(-1);
      query = query.reshape({rows / copies, copies, embed});
      torch::Tensor weights = at::softmax(at::bmm(query, keys), -1).view({rows, 1, -1});
      torch::Tensor grouped = copies > 1 ? weights.reshape({rows / copies, copies, -1}) : weights;
      torch::Tensor context = (at::bmm(grouped, values) * length_scale).view({rows, 1, -1}).view({rows, embed});
      x = block.project_out(context).add_(x).mul_(kSqrtHalf);
      x = (x + residual).mul_(kSqrtHalf);  // add_residual
    }
    return {at::log_softmax(fc3_(fc2_(x)), -1, torch::kFloat), std::move(histories)};
  }

 private:
  Rows fc1_;
  std::vector<Block> blocks_;
  Rows fc2_, fc3_;
};

Rows rows_of(const py::handle& bias_and_weight_t) {
  auto pair = bias_and_weight_t.cast<py::tuple>();
  return Rows{pair[0].cast<torch::Tensor>(), pair[1].cast<torch::Tensor>()};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Step>(m, "Step")
      .def(py::init([](const py::object& fc1, const py::list& blocks, const py::object& fc2, const py::object& fc3) {
        // each layer (bias, w^T); blocks: (convolve, project_in, project_out, history) per block
        std::vector<Block> compiled;
        for (const auto& item : blocks) {
          auto block = item.cast<py::tuple>();
          compiled.push_back(Block{rows_of(block[0]), rows_of(block[1]), rows_of(block[2]), block[3].cast<int64_t>()});
        }
        return Step(rows_of(fc1), std::move(compiled), rows_of(fc2), rows_of(fc3));
      }))
      .def("log_probs", &Step::log_probs);
}
