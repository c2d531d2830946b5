#include "engine/reconstruction_cache.h"

#include <algorithm>

#include "kernels/attention.h"
#include "kv/grouped_attention.h"
#include "util/error.h"

namespace qevict {
namespace {

// Max of every query's softmax probability per base token, race-free: each parallel item of the
// attention pass (a query block and a KV head) owns one row; rows are reduced afterwards.
class MaxProbObserver {
 public:
  static constexpr bool kEnabled = true;
  MaxProbObserver(int n_kv, int64_t base_tokens, int group, std::vector<float>* rows)
      : n_kv_(n_kv), base_(base_tokens), group_(group), rows_(rows) {}
  void Prepare(int n, int64_t splits, const int64_t*) {
    QEVICT_CHECK(splits == 1);  // a reconstruction batch is long enough for one split
    n_ = n;
    rows_->assign(static_cast<size_t>(QueryItemRow(n, n - 1) + 1) * n_kv_ * base_, 0.0f);
  }
  void OnItem(int64_t, int i, int h, int64_t begin, int64_t end, const float* probs, int64_t ld,
              const float* sums) {
    float* row = rows_->data() + (QueryItemRow(n_, i) * n_kv_ + h) * base_;
    const int64_t stop = std::min(end, base_);
    for (int g = 0; g < group_; ++g) {
      if (!(sums[g] > 0.0f)) continue;
      const float inv = 1.0f / sums[g];
      const float* p = probs + g * ld;
      for (int64_t j = begin; j < stop; ++j) row[j] = std::max(row[j], p[j - begin] * inv);
    }
  }
  void OnShare(int, int, int64_t, int, float) {}

 private:
  int n_kv_;
  int64_t base_;
  int group_;
  int n_ = 0;
  std::vector<float>* rows_;
};

// [tokens][n_kv][hd] fp32 -> [n_kv][tokens][hd] fp16.
void ToHeadMajor(const float* src, int64_t tokens, int n_kv, int hd, std::vector<uint16_t>* dst) {
  dst->resize(static_cast<size_t>(tokens) * n_kv * hd);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < n_kv; ++h) {
      Fp32ToFp16Row(src + (t * n_kv + h) * hd, dst->data() + (h * tokens + t) * hd, hd);
    }
  }
}

}  // namespace

ReconstructionCache::ReconstructionCache(const KvCache& base, const ModelConfig& config,
                                         const KvGeometry& geometry, const RopeTables& ropes,
                                         std::vector<int> policy_layer)
    : base_(base), config_(config), geo_(geometry), ropes_(ropes),
      policy_layer_(std::move(policy_layer)) {
  int scored = 0;
  for (int p : policy_layer_) scored = std::max(scored, p + 1);
  token_max_.resize(scored);
  geo_.n_layers = static_cast<int>(policy_layer_.size());
}

void ReconstructionCache::Store(int layer, int n, const int32_t* pos, const float* k,
                                const float* v) {
  const int n_kv = geo_.n_kv_heads, hd = geo_.head_dim;
  const Rope& rope = policy_layer_[layer] < 0 ? ropes_.sliding() : *ropes_.global;
  dense_k_.assign(k, k + static_cast<int64_t>(n) * n_kv * hd);
  for (int i = 0; i < n; ++i) rope.Apply(dense_k_.data() + int64_t{i} * n_kv * hd, n_kv, hd, pos[i]);
  ToHeadMajor(dense_k_.data(), n, n_kv, hd, &new_k_);
  ToHeadMajor(v, n, n_kv, hd, &new_v_);
  new_pos_.assign(pos, pos + n);
  staged_layer_ = layer;
  staged_n_ = n;
}

void ReconstructionCache::Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
                                 ThreadPool& pool) {
  QEVICT_CHECK(staged_layer_ == layer && staged_n_ == n);
  const int n_kv = geo_.n_kv_heads, hd = geo_.head_dim;
  base_.DenseLayer(layer, &dense_k_, &dense_v_, &ctx_pos_);
  const int64_t T = static_cast<int64_t>(ctx_pos_.size());
  ToHeadMajor(dense_k_.data(), T, n_kv, hd, &ctx_k_);
  ToHeadMajor(dense_v_.data(), T, n_kv, hd, &ctx_v_);

  std::vector<int64_t> visible(n), first(n, 0);
  const bool sliding = policy_layer_[layer] < 0;
  for (int i = 0; i < n; ++i) {
    QEVICT_CHECK(T == 0 || pos[i] > ctx_pos_.back());
    visible[i] = T + i + 1;
    if (sliding) {  // keys at pos[i] - window + 1 .. pos[i]
      const int32_t lo = pos[i] - config_.sliding_window;
      first[i] = std::upper_bound(ctx_pos_.begin(), ctx_pos_.end(), lo) - ctx_pos_.begin();
      if (first[i] == T) first[i] += std::upper_bound(pos, pos + n, lo) - pos;
    }
  }
  // Key index r < T: the base's token r; r >= T: the pass's own token r - T.
  auto pieces = [&](int h, int64_t begin, int64_t end, auto&& fn) {
    if (begin < T) {
      const int64_t stop = std::min(end, T);
      fn(int64_t{0}, ctx_k_.data() + (h * T + begin) * hd, ctx_v_.data() + (h * T + begin) * hd,
         stop - begin);
    }
    if (end > T) {
      const int64_t from = std::max(begin, T);
      const int64_t at = from - T;
      fn(from - begin, new_k_.data() + (h * int64_t{n} + at) * hd,
         new_v_.data() + (h * int64_t{n} + at) * hd, end - from);
    }
  };
  auto score = [&](int h, int64_t begin, int64_t end, const float* qg, int n_q, float* scores,
                   int64_t ld, float scale) {
    pieces(h, begin, end, [&](int64_t at, const uint16_t* k, const uint16_t*, int64_t rows) {
      ScoreFp16Keys(qg, n_q, k, hd, rows, hd, scale, scores + at, ld);
    });
  };
  auto accumulate = [&](int h, int64_t begin, int64_t end, const float* p, int n_q, int64_t ld,
                        float* acc) {
    pieces(h, begin, end, [&](int64_t at, const uint16_t*, const uint16_t* v, int64_t rows) {
      AccumulateFp16Values(p + at, n_q, ld, v, hd, rows, hd, acc);
    });
  };
  if (sliding) {
    NoAttentionObserver none;
    GroupedAttentionOverPrefix(geo_, n, visible.data(), q, out, pool, score, accumulate, none,
                               first.data());
  } else {
    MaxProbObserver observer(n_kv, T, geo_.n_heads / n_kv, &rows_);
    GroupedAttentionOverPrefix(geo_, n, visible.data(), q, out, pool, score, accumulate, observer);
    std::vector<float>& best = token_max_[policy_layer_[layer]];
    if (static_cast<int64_t>(best.size()) != n_kv * T) best.assign(n_kv * T, 0.0f);
    const int64_t n_rows = static_cast<int64_t>(rows_.size()) / std::max<int64_t>(T, 1);
    for (int64_t r = 0; r < n_rows; ++r) {  // row r belongs to KV head r % n_kv
      const float* row = rows_.data() + r * T;
      float* dst = best.data() + (r % n_kv) * T;
      for (int64_t j = 0; j < T; ++j) dst[j] = std::max(dst[j], row[j]);
    }
  }
  const int64_t bytes =
      static_cast<int64_t>((ctx_k_.capacity() + ctx_v_.capacity() + new_k_.capacity() +
                            new_v_.capacity()) * sizeof(uint16_t) +
                           (dense_k_.capacity() + dense_v_.capacity() + rows_.capacity()) *
                               sizeof(float));
  peak_bytes_ = std::max(peak_bytes_, bytes);
  staged_layer_ = -1;
}

}  // namespace qevict
