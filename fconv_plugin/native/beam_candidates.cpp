// One beam-search step's candidates in one pass over the vocabulary: what
// beam_search.py's _constrain and _best_candidates do as torch operations (fairseq's
// SequenceGenerator and BeamSearch.step), for the steps with no prefix to force and
// before the last one.
//
// As torch operations a step makes five passes over every hypothesis' log-probabilities
// (rows x vocabulary): NaN to -inf, pad, unk and </s> columns, adding each hypothesis'
// score into a new tensor, and a top-k that copies (value, index) pairs of the whole
// sentence before selecting. At beam 5 x 16 sentences and a 4,576-word vocabulary
// that is 366,080 values a pass, more time than the decoder's fc3. Here each sentence's
// beam is read once: every value gets the same float32 operations in the same order
// (NaN -> -inf; pad -> -inf; unk: v - unk_penalty; </s> -> -inf before min_len; then
// v + score), and the 2 x beam largest are kept as they stream by. A block of 16 values
// is only looked at one by one when one of them beats the worst kept (compared eight lanes
// at a time).
//
// The result is torch.topk's over the sentence's beam x vocabulary, best first. Equal
// values are ordered by their index in the sentence's flattened beam x vocabulary, the
// lowest first; torch.topk leaves their order to its partial sort. So the two differ only
// where candidates are equal to the last bit: in practice the -inf candidates of a
// sentence with fewer possible words than 2 x beam, which never finish and never outscore
// a finite hypothesis, so no output changes.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "apis.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kBlock = 16;

struct Rules {
  int64_t pad, unk, eos;
  float unk_penalty;
  bool forbid_eos;  // before min_len
};

// The k best (value, flat index) seen so far, best first; equal values by index.
class Kept {
 public:
  explicit Kept(int64_t k) : k_(k), values_(k), indices_(k) {}
  float worst() const { return count_ < k_ ? kNegInf : values_[k_ - 1]; }
  bool full() const { return count_ == k_; }
  // Offer one candidate; candidates come in increasing index, so an equal value goes after
  // the kept ones, and a value equal to the worst kept does not enter (as heap selection).
  void offer(float value, int64_t index) {
    if (count_ == k_ && !(value > values_[k_ - 1])) return;
    int64_t at = count_ < k_ ? count_++ : k_ - 1;
    while (at > 0 && value > values_[at - 1]) {
      values_[at] = values_[at - 1];
      indices_[at] = indices_[at - 1];
      --at;
    }
    values_[at] = value;
    indices_[at] = index;
  }
  float value(int64_t i) const { return values_[i]; }
  int64_t index(int64_t i) const { return indices_[i]; }

 private:
  int64_t k_;
  int64_t count_ = 0;
  std::vector<float> values_;
  std::vector<int64_t> indices_;
};

// log-probability v of token t after fairseq's rules, plus the hypothesis' score
inline float candidate(float v, int64_t t, const Rules& rules, float score, bool add_score) {
  if (v != v) v = kNegInf;
  if (t == rules.pad) v = kNegInf;
  if (t == rules.unk) v = v - rules.unk_penalty;
  if (rules.forbid_eos && t == rules.eos) v = kNegInf;
  return add_score ? v + score : v;
}

#define FCONV_INLINE static inline __attribute__((always_inline))

typedef float Floats8 __attribute__((vector_size(32), aligned(4)));  // may be unaligned
typedef int32_t Ints8 __attribute__((vector_size(32)));
typedef int64_t Longs4 __attribute__((vector_size(32)));

// Whether any of a block's kBlock candidates v + score beats ``worst``: eight lanes at a
// time, no reduction to a largest value. A NaN compares false, as the -inf the rules make
// of it; the values that pass are then taken one by one with the rules.
FCONV_INLINE bool any_beats(const float* __restrict values, float score, float worst) {
  const Floats8 add = {score, score, score, score, score, score, score, score};
  const Floats8 bar = {worst, worst, worst, worst, worst, worst, worst, worst};
  Ints8 beats = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t j = 0; j < kBlock; j += 8) beats |= (*reinterpret_cast<const Floats8*>(values + j) + add) > bar;
  const Longs4 lanes = reinterpret_cast<Longs4>(beats);
  return (lanes[0] | lanes[1] | lanes[2] | lanes[3]) != 0;
}

// One hypothesis' row (vocab values) offered to ``kept``, flat indices from ``offset``.
FCONV_INLINE void scan_row_body(const float* __restrict row, int64_t vocab, int64_t offset, const Rules& rules,
                                float score, bool add_score, Kept& kept) {
  int64_t t = 0;
  while (t < vocab) {
    const int64_t end = std::min(vocab, t + kBlock);
    bool special = !kept.full() || end - t < kBlock;
    for (const int64_t s : {rules.pad, rules.unk, rules.eos}) special = special || (s >= t && s < end);
    if (!special && !any_beats(row + t, add_score ? score : 0.0f, kept.worst())) {
      t = end;
      continue;
    }
    for (; t < end; ++t) kept.offer(candidate(row[t], t, rules, score, add_score), offset + t);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
const bool kAvx2 = __builtin_cpu_supports("avx2");
#define FCONV_AVX2 __attribute__((target("avx2")))
#else
constexpr bool kAvx2 = false;
#define FCONV_AVX2
#endif

void scan_row_baseline(const float* row, int64_t vocab, int64_t offset, const Rules& rules, float score,
                       bool add_score, Kept& kept) {
  scan_row_body(row, vocab, offset, rules, score, add_score, kept);
}
FCONV_AVX2 void scan_row_avx2(const float* row, int64_t vocab, int64_t offset, const Rules& rules, float score,
                              bool add_score, Kept& kept) {
  scan_row_body(row, vocab, offset, rules, score, add_score, kept);
}

}  // namespace

// best_candidates on a scores array: score_data[row * score_stride] is row's cumulative
// score, or score_data is null at the first step.
std::vector<torch::Tensor> best_candidates_of(const torch::Tensor& lprobs, const float* score_data,
                                              int64_t score_stride, int64_t beam, int64_t k, const Rules& rules) {
  TORCH_CHECK(lprobs.dim() == 2 && lprobs.scalar_type() == torch::kFloat, "lprobs is a float32 matrix");
  TORCH_CHECK(beam > 0 && lprobs.size(0) % beam == 0, "lprobs has beam rows per sentence");
  const auto values_in = lprobs.contiguous();
  const int64_t vocab = values_in.size(1), sentences = values_in.size(0) / beam;
  const bool add_score = score_data != nullptr;
  const int64_t searched = add_score ? beam : 1;  // the first step extends one hypothesis
  TORCH_CHECK(k > 0 && k <= searched * vocab, "k is at most the candidates of a sentence");

  auto out_values = torch::empty({sentences, k}, values_in.options());
  auto out_beams = torch::empty({sentences, k}, values_in.options().dtype(torch::kLong));
  auto out_tokens = torch::empty({sentences, k}, values_in.options().dtype(torch::kLong));
  const float* in = values_in.data_ptr<float>();
  float* values = out_values.data_ptr<float>();
  int64_t* beams = out_beams.data_ptr<int64_t>();
  int64_t* tokens = out_tokens.data_ptr<int64_t>();
  at::parallel_for(0, sentences, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      Kept kept(k);
      for (int64_t b = 0; b < searched; ++b) {
        const int64_t row = s * beam + b;
        const float score = add_score ? score_data[row * score_stride] : 0.0f;
        (kAvx2 ? scan_row_avx2 : scan_row_baseline)(in + row * vocab, vocab, b * vocab, rules, score, add_score,
                                                   kept);
      }
      for (int64_t i = 0; i < k; ++i) {
        values[s * k + i] = kept.value(i);
        beams[s * k + i] = kept.index(i) / vocab;
        tokens[s * k + i] = kept.index(i) % vocab;
      }
    }
  });
  return {out_values, out_beams, out_tokens};
}

// lprobs: (sentences * beam) x vocab, float32, the decoder's log-probabilities; scores:
// (sentences * beam) float32 cumulative scores of the hypotheses, or undefined at the
// first step, where only each sentence's first hypothesis is extended and nothing is
// added. Returns (values, beams, tokens), sentences x k each, best first.
std::vector<torch::Tensor> best_candidates(const torch::Tensor& lprobs, const c10::optional<torch::Tensor>& scores,
                                           int64_t beam, int64_t k, int64_t pad, int64_t unk, double unk_penalty,
                                           int64_t eos, bool forbid_eos) {
  const bool add_score = scores.has_value() && scores->defined();
  torch::Tensor score_values;
  if (add_score) {
    score_values = scores->to(torch::kFloat).contiguous();
    TORCH_CHECK(score_values.numel() == lprobs.size(0), "one score per hypothesis");
  }
  const Rules rules{pad, unk, eos, static_cast<float>(unk_penalty), forbid_eos};
  return best_candidates_of(lprobs, add_score ? score_values.data_ptr<float>() : nullptr, 1, beam, k, rules);
}

// One sentence's k candidates (best first) split as split_candidates splits them: ends[j]
// for the first beam, and the beam's continuation in rows, tokens, scores and fillers
// [0, beam), its rows counted from first_row.
FCONV_INLINE void split_sentence(const float* score, const int64_t* beam_of, const int64_t* token,
                                 const bool* was_filler, int64_t k, int64_t beam, int64_t eos, int64_t first_row,
                                 bool* ends, int64_t* rows, int64_t* tokens, float* scores, bool* fillers,
                                 std::vector<bool>& unavailable) {
  for (int64_t j = 0; j < k; ++j) {
    bool ends_here = token[j] == eos && score[j] != kNegInf;
    if (j < beam) {
      ends_here = ends_here && !was_filler[j];
      ends[j] = ends_here;
      unavailable[j] = ends_here || was_filler[j];
    } else {
      unavailable[j] = ends_here;
    }
  }
  int64_t taken = 0;
  for (int pass = 0; pass < 2 && taken < beam; ++pass) {  // the available ones, then fillers
    for (int64_t j = 0; j < k && taken < beam; ++j) {
      if (unavailable[j] != (pass == 1)) continue;
      rows[taken] = first_row + beam_of[j];
      tokens[taken] = token[j];
      scores[taken] = score[j];
      fillers[taken++] = pass == 1;
    }
  }
}

// The step's candidates (sentences x k, best first, from best_candidates or torch.topk) split
// as fairseq's SequenceGenerator splits them, in one pass instead of a dozen small kernels:
// - ``ending`` (sentences x beam): the first beam candidates that end in </s> with a finite
//   score and were not fillers at the last step (``ignored``): finished hypotheses;
// - what the beam continues with: the first beam candidates that do not end so, in order,
//   then, if fewer than beam do, the ending ones in order as fillers (the rank order of
//   fairseq's active_mask and its top-k): their rows (sentence · beam + beam index), tokens
//   and scores, and which are fillers (the next step's ``ignored``).
std::vector<torch::Tensor> split_candidates(const torch::Tensor& cand_scores, const torch::Tensor& cand_beams,
                                            const torch::Tensor& cand_tokens, const torch::Tensor& ignored,
                                            int64_t eos, int64_t beam) {
  TORCH_CHECK(cand_scores.dim() == 2 && cand_scores.scalar_type() == torch::kFloat &&
                  cand_beams.sizes() == cand_scores.sizes() && cand_tokens.sizes() == cand_scores.sizes() &&
                  cand_beams.scalar_type() == torch::kLong && cand_tokens.scalar_type() == torch::kLong,
              "split_candidates takes float32 scores and int64 beams and tokens, sentences x k each");
  const int64_t sentences = cand_scores.size(0), k = cand_scores.size(1);
  TORCH_CHECK(beam > 0 && k >= beam && ignored.scalar_type() == torch::kBool && ignored.dim() == 2 &&
                  ignored.size(0) == sentences && ignored.size(1) == beam,
              "split_candidates takes at least beam candidates and a sentences x beam mask of fillers");
  const auto scores_in = cand_scores.contiguous(), beams_in = cand_beams.contiguous();
  const auto tokens_in = cand_tokens.contiguous(), ignored_in = ignored.contiguous();
  const auto options = scores_in.options();
  auto ending = torch::empty({sentences, beam}, options.dtype(torch::kBool));
  auto rows = torch::empty({sentences, beam}, options.dtype(torch::kLong));
  auto tokens = torch::empty({sentences, beam}, options.dtype(torch::kLong));
  auto scores = torch::empty({sentences, beam}, options);
  auto fillers = torch::empty({sentences, beam}, options.dtype(torch::kBool));
  const float* score_in = scores_in.data_ptr<float>();
  const int64_t* beam_in = beams_in.data_ptr<int64_t>();
  const int64_t* token_in = tokens_in.data_ptr<int64_t>();
  const bool* was_filler = ignored_in.data_ptr<bool>();
  bool* ends = ending.data_ptr<bool>();
  int64_t* row_out = rows.data_ptr<int64_t>();
  int64_t* token_out = tokens.data_ptr<int64_t>();
  float* score_out = scores.data_ptr<float>();
  bool* filler_out = fillers.data_ptr<bool>();
  std::vector<bool> unavailable(k);
  for (int64_t s = 0; s < sentences; ++s) {
    const int64_t first = s * beam;
    split_sentence(score_in + s * k, beam_in + s * k, token_in + s * k, was_filler + first, k, beam, eos, first,
                   ends + first, row_out + first, token_out + first, score_out + first, filler_out + first,
                   unavailable);
  }
  return {ending, rows, tokens, scores, fillers};
}

namespace {

// beam_search.py's _Bookkeeping between two steps, in one call instead of some 40 small
// torch operations: the step's candidates split (split_candidates' rules), the hypotheses
// ending in </s> written into their sentence's next free slots (scored by length, §4.3),
// sentences with beam finished hypotheses leaving the batch, and the live hypotheses
// extended with the beam's choice. For searches without attention weights or forced
// prefixes; the same float32 operations on the same values as the torch form, so the same
// bits (tests/inference/test_beam_search.py runs both against fairseq's generator).
class Bookkeeping {
 public:
  Bookkeeping(int64_t sentences, int64_t beam, int64_t max_len, int64_t eos, int64_t pad, bool normalize_scores,
              double len_penalty)
      : beam_(beam), max_len_(max_len), eos_(eos), normalize_(normalize_scores), len_penalty_(len_penalty),
        live_(sentences), ignored_(new bool[sentences * beam]()), original_(sentences) {
    TORCH_CHECK(sentences > 0 && beam > 0 && max_len >= 0, "a search of at least one sentence and one hypothesis");
    const auto longs = torch::TensorOptions().dtype(torch::kLong);
    for (auto& tokens : tokens_) {
      tokens = torch::full({sentences * beam, max_len + 2}, pad, longs);
      tokens.select(1, 0).fill_(eos);
    }
    for (auto& scores : scores_) scores = torch::zeros({sentences * beam, max_len + 1});
    for (int64_t s = 0; s < sentences; ++s) original_[s] = s;
    count_ = torch::zeros({sentences}, longs);
    finished_tokens_ = torch::zeros({sentences, beam, max_len + 1}, longs);
    finished_positional_ = torch::zeros({sentences, beam, max_len + 1});
    finished_lengths_ = torch::zeros({sentences, beam}, longs);
    finished_scores_ = torch::full({sentences, beam}, kNegInf);
  }

  // the live hypotheses' tokens so far: rows x (step + 1), starting with </s>
  torch::Tensor tokens(int64_t step) const {
    return tokens_[current_].narrow(0, 0, live_ * beam_).narrow(1, 0, step + 1);
  }

  // the live hypotheses' cumulative scores after ``step`` (a column, one per row)
  torch::Tensor scores(int64_t step) const { return scores_[current_].narrow(0, 0, live_ * beam_).select(1, step); }

  // Takes the step's candidates (sentences x k, best first); returns whether every
  // sentence is finished, else the rows of the old state the new rows continue (the
  // decoder state's reordering) and the sentences kept (indices among the live ones)
  // where some finished, else None.
  std::tuple<bool, c10::optional<torch::Tensor>, c10::optional<torch::Tensor>> advance(
      int64_t step, const torch::Tensor& cand_scores, const torch::Tensor& cand_beams,
      const torch::Tensor& cand_tokens) {
    TORCH_CHECK(step >= 0 && step <= max_len_, "step ", step, " is outside 0..", max_len_);
    TORCH_CHECK(cand_scores.dim() == 2 && cand_scores.size(0) == live_ && cand_scores.size(1) >= beam_ &&
                    cand_scores.scalar_type() == torch::kFloat && cand_beams.sizes() == cand_scores.sizes() &&
                    cand_tokens.sizes() == cand_scores.sizes() && cand_beams.scalar_type() == torch::kLong &&
                    cand_tokens.scalar_type() == torch::kLong,
                "advance takes float32 scores and int64 beams and tokens, live sentences x at least beam each");
    const auto scores_in = cand_scores.contiguous(), beams_in = cand_beams.contiguous();
    const auto tokens_in = cand_tokens.contiguous();
    const float* score_in = scores_in.data_ptr<float>();
    const int64_t* beam_in = beams_in.data_ptr<int64_t>();
    const int64_t* token_in = tokens_in.data_ptr<int64_t>();
    const int64_t k = cand_scores.size(1), width = max_len_ + 2, score_width = max_len_ + 1;
    const int64_t* old_tokens = tokens_[current_].data_ptr<int64_t>();
    const float* old_scores = scores_[current_].data_ptr<float>();
    int64_t* count = count_.data_ptr<int64_t>();
    const float normalizer = static_cast<float>(std::pow(static_cast<double>(step + 1), len_penalty_));

    // finished hypotheses, and the beam's continuation as split_candidates chooses it
    const int64_t rows_now = live_ * beam_;
    std::vector<int64_t> rows(rows_now), next_tokens(rows_now);
    std::vector<float> next_scores(rows_now);
    std::unique_ptr<bool[]> ends(new bool[rows_now]), fillers(new bool[rows_now]);
    std::vector<bool> unavailable(k);
    std::vector<int64_t> kept;
    for (int64_t s = 0; s < live_; ++s) {
      const int64_t first = s * beam_;
      split_sentence(score_in + s * k, beam_in + s * k, token_in + s * k, ignored_.get() + first, k, beam_, eos_,
                     first, ends.get() + first, rows.data() + first, next_tokens.data() + first,
                     next_scores.data() + first, fillers.get() + first, unavailable);
      bool ends_any = false;
      for (int64_t j = 0; j < beam_; ++j) {  // in candidate order, while the sentence has slots
        if (!ends[first + j]) continue;
        ends_any = true;
        finish(step, s, first + beam_in[s * k + j], score_in[s * k + j], normalizer, old_tokens, old_scores);
      }
      if (!(ends_any && (count[original_[s]] == beam_ || step == max_len_))) kept.push_back(s);
    }
    if (kept.empty()) return {true, c10::nullopt, c10::nullopt};

    // the kept sentences' new rows, each continuing a row of the old state
    const bool some_left = static_cast<int64_t>(kept.size()) < live_;
    const int64_t next_live = static_cast<int64_t>(kept.size());
    auto order = torch::empty({next_live * beam_}, torch::TensorOptions().dtype(torch::kLong));
    int64_t* order_data = order.data_ptr<int64_t>();
    int64_t* new_tokens = tokens_[1 - current_].data_ptr<int64_t>();
    float* new_scores = scores_[1 - current_].data_ptr<float>();
    for (int64_t n = 0; n < next_live; ++n) {
      const int64_t s = kept[n];
      for (int64_t b = 0; b < beam_; ++b) {
        const int64_t from = s * beam_ + b, to = n * beam_ + b, source = rows[from];
        order_data[to] = source;
        std::copy(old_tokens + source * width, old_tokens + source * width + step + 1, new_tokens + to * width);
        new_tokens[to * width + step + 1] = next_tokens[from];
        std::copy(old_scores + source * score_width, old_scores + source * score_width + step,
                  new_scores + to * score_width);
        new_scores[to * score_width + step] = next_scores[from];
        ignored_[to] = fillers[from];
      }
      original_[n] = original_[s];
    }
    current_ = 1 - current_;
    live_ = next_live;
    c10::optional<torch::Tensor> kept_sentences;
    if (some_left) kept_sentences = torch::tensor(kept, torch::TensorOptions().dtype(torch::kLong));
    return {false, order, kept_sentences};
  }

  // advance with best_candidates' choice from the step's log-probabilities and the live
  // hypotheses' scores (one call where the search would make three)
  std::tuple<bool, c10::optional<torch::Tensor>, c10::optional<torch::Tensor>> advance_with_best_candidates(
      int64_t step, const torch::Tensor& lprobs, int64_t k, int64_t pad, int64_t unk, double unk_penalty,
      bool forbid_eos) {
    TORCH_CHECK(step >= 0 && step <= max_len_ && lprobs.dim() == 2 && lprobs.size(0) == live_ * beam_,
                "lprobs has a row per live hypothesis");
    const float* scores = step > 0 ? scores_[current_].data_ptr<float>() + (step - 1) : nullptr;
    const Rules rules{pad, unk, eos_, static_cast<float>(unk_penalty), forbid_eos};
    const auto candidates = best_candidates_of(lprobs, scores, max_len_ + 1, beam_, k, rules);
    return advance(step, candidates[0], candidates[1], candidates[2]);
  }

  // Steps from `step` on without Python between them, for a search with nothing but the
  // candidates' pass between the decoder and the books (no attention kept, no n-grams
  // blocked, no prefixes): each reorders `decoding` (decoder_step.cpp's Decoding, driven
  // through the table `api` that module hands out, apis.h) by the last step's order, runs
  // its step on the newest tokens at position padding_idx + step + 1, and advances with
  // the best candidates. Stops after a step where every sentence finished or some left
  // (the source the decoding reads must then follow them), or before the last step
  // (max_len), whose rules the search applies. `decoding` starts in the order of the live
  // rows. Returns (finished, the next step, the order the decoding awaits, the sentences
  // kept where some left). Called without the GIL: C++ and ATen throughout.
  std::tuple<bool, int64_t, c10::optional<torch::Tensor>, c10::optional<torch::Tensor>> run_steps(
      void* decoding, const fconv_decoding::Api& api, int64_t step, int64_t vocab, int64_t padding_idx, int64_t pad,
      int64_t unk, double unk_penalty, int64_t min_len) {
    c10::optional<torch::Tensor> order;
    for (; step < max_len_; ++step) {
      if (order.has_value()) api.reorder(decoding, *order);
      const auto lprobs = api.log_probs(decoding, tokens(step).select(1, step), padding_idx + step + 1);
      // BeamSearch._candidate_count: twice the beam, fewer if a sentence has fewer extensions
      const int64_t k = std::min<int64_t>(2 * beam_, (step == 0 ? 1 : beam_) * vocab - 1);
      auto [finished, next_order, kept] =
          advance_with_best_candidates(step, lprobs, k, pad, unk, unk_penalty, step < min_len);
      if (finished || kept.has_value()) return {finished, step + 1, next_order, kept};
      order = std::move(next_order);
    }
    return {false, step, order, c10::nullopt};
  }

  // every sentence's finished hypotheses: count (sentences), tokens and positional scores
  // (sentences x beam x max_len + 1), lengths and scores (sentences x beam), in slot order
  std::vector<torch::Tensor> finished() const {
    return {count_, finished_tokens_, finished_positional_, finished_lengths_, finished_scores_};
  }

 private:
  // Live sentence s's candidate from old row ``row`` ends in </s> at ``step`` with the
  // cumulative score ``score``: the sentence's next free slot takes it, if one is left.
  void finish(int64_t step, int64_t s, int64_t row, float score, float normalizer, const int64_t* old_tokens,
              const float* old_scores) {
    const int64_t sentence = original_[s];
    int64_t& count = count_.data_ptr<int64_t>()[sentence];
    if (count >= beam_) return;
    const int64_t slot = sentence * beam_ + count++, width = max_len_ + 1;
    int64_t* tokens = finished_tokens_.data_ptr<int64_t>() + slot * width;
    float* positional = finished_positional_.data_ptr<float>() + slot * width;
    const int64_t* history = old_tokens + row * (max_len_ + 2);
    const float* cumulative = old_scores + row * (max_len_ + 1);
    std::copy(history + 1, history + step + 1, tokens);
    tokens[step] = eos_;
    float previous = 0.0f;
    for (int64_t i = 0; i <= step; ++i) {  // each position's own score: the cumulative ones' differences
      const float now = i < step ? cumulative[i] : score;
      positional[i] = i == 0 ? now : now - previous;
      previous = now;
    }
    finished_lengths_.data_ptr<int64_t>()[slot] = step + 1;
    finished_scores_.data_ptr<float>()[slot] = normalize_ ? score / normalizer : score;
  }

  int64_t beam_, max_len_, eos_;
  bool normalize_;
  double len_penalty_;
  int64_t live_;
  std::unique_ptr<bool[]> ignored_;  // live rows: fillers at the last step, which cannot finish
  std::vector<int64_t> original_;  // live sentence -> its index in the batch
  torch::Tensor tokens_[2], scores_[2];  // the live rows' histories; one is read while the other is written
  int current_ = 0;
  torch::Tensor count_, finished_tokens_, finished_positional_, finished_lengths_, finished_scores_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("best_candidates", &best_candidates,
        "a beam step's 2 x beam best (score, beam, token) per sentence, fairseq's rules applied, in one pass");
  m.def("split_candidates", &split_candidates,
        "the candidates ending in </s>, and the beam's continuation (rows, tokens, scores, fillers), as fairseq splits them");
  py::class_<Bookkeeping>(m, "Bookkeeping", "beam search's finished hypotheses and live beams between steps")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, bool, double>(), py::arg("sentences"),
           py::arg("beam"), py::arg("max_len"), py::arg("eos"), py::arg("pad"), py::arg("normalize_scores"),
           py::arg("len_penalty"))
      .def("tokens", &Bookkeeping::tokens, py::arg("step"))
      .def("scores", &Bookkeeping::scores, py::arg("step"))
      .def("advance", &Bookkeeping::advance, py::arg("step"), py::arg("cand_scores"), py::arg("cand_beams"),
           py::arg("cand_tokens"))
      .def("advance_with_best_candidates", &Bookkeeping::advance_with_best_candidates, py::arg("step"),
           py::arg("lprobs"), py::arg("k"), py::arg("pad"), py::arg("unk"), py::arg("unk_penalty"),
           py::arg("forbid_eos"), py::call_guard<py::gil_scoped_release>())
      .def(
          "run_steps",
          [](Bookkeeping& book, const py::object& decoding, const py::capsule& api, int64_t step, int64_t vocab,
             int64_t padding_idx, int64_t pad, int64_t unk, double unk_penalty, int64_t min_len) {
            TORCH_CHECK(api.name() != nullptr && std::string(api.name()) == fconv_decoding::kApiCapsuleName,
                        "not the compiled decoding's table (fconv_plugin.native._decoder_step.api)");
            const auto* table = api.get_pointer<fconv_decoding::Api>();
            void* state = table->decoding_of(decoding.ptr());
            TORCH_CHECK(state != nullptr, "run_steps drives the compiled decoding (decoder_step's Decoding)");
            py::gil_scoped_release no_gil;  // C++ only: other threads' searches go on meanwhile
            return book.run_steps(state, *table, step, vocab, padding_idx, pad, unk, unk_penalty, min_len);
          },
          py::arg("decoding"), py::arg("api"), py::arg("step"), py::arg("vocab"), py::arg("padding_idx"),
          py::arg("pad"), py::arg("unk"), py::arg("unk_penalty"), py::arg("min_len"))
      .def("finished", &Bookkeeping::finished);
}
