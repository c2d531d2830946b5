// Attention of the tiered cache: GroupedAttentionOverPrefix over the resident keys in position
// order (sinks, then each resident window), with callbacks that dispatch each window to the fp16
// or the quantized kernel. Ranges are cut only at window boundaries and every kernel treats keys
// independently (scores) or in key order (values), so with every window in fp16 the outputs are
// bit-identical to FullCache's.
//
// A window holds 8 keys, and each kernel call pays a setup as large as the work on a few keys
// (the queries transposed for prefill scores, the outputs loaded into registers and stored back
// for values). So consecutive fp16 windows (and the sinks before them) are not handed to the
// kernels one by one: their rows are gathered into a per-thread run of up to kRunRows rows and
// the run goes through one call. Gathering copies rows and does not reorder keys, so the
// results are the same bits as window by window.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention.h"
#include "kv/grouped_attention.h"
#include "kv/quant_attention.h"
#include "kv/tiered_cache.h"

namespace qevict {
namespace {

// Windows live in separate blocks, so the hardware prefetchers cannot see the next one coming:
// ask for the first lines of the head's part of a window a little ahead.
inline void PrefetchLines(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}

constexpr int kPrefetchWindows = 2;  // how far ahead

constexpr int64_t kRunRows = 256;  // rows of one gathered run (128 KiB at head_dim 256)

// Consecutive fp16 rows of one KV head, from several windows, handed to a kernel as one range.
// A run of one segment is passed in place; a second segment copies both into the staging rows.
class Fp16Run {
 public:
  explicit Fp16Run(int head_dim) : hd_(head_dim) {
    thread_local std::vector<uint16_t> staging;
    if (static_cast<int64_t>(staging.size()) < kRunRows * hd_) staging.resize(kRunRows * hd_);
    staged_ = staging.data();
  }

  // Appends n rows at p (row stride head_dim), keys [at, at + n) of the range, right after the
  // run's last key. `flush(at, rows, n)` receives each full run.
  template <class Flush>
  void Add(int64_t at, const uint16_t* p, int64_t n, Flush&& flush) {
    if (n_ > 0 && n_ + n > kRunRows) Finish(flush);
    if (n_ == 0) {
      at_ = at, first_ = p, n_ = n, copied_ = false;
      return;
    }
    if (!copied_) {
      std::memcpy(staged_, first_, static_cast<size_t>(n_ * hd_) * sizeof(uint16_t));
      copied_ = true;
    }
    std::memcpy(staged_ + n_ * hd_, p, static_cast<size_t>(n * hd_) * sizeof(uint16_t));
    n_ += n;
  }

  template <class Flush>
  void Finish(Flush&& flush) {
    if (n_ > 0) flush(at_, copied_ ? staged_ : first_, n_);
    n_ = 0;
  }

 private:
  const int hd_;
  uint16_t* staged_ = nullptr;
  int64_t at_ = 0, n_ = 0;
  const uint16_t* first_ = nullptr;
  bool copied_ = false;
};

}  // namespace

void TieredCache::PrefetchWindow(const LayerState& l, size_t k, int head, bool keys) const {
  if (k >= l.windows.size()) return;
  const WindowRecord& w = l.windows[k];
  const int hd = geo_.head_dim;
  if (w.tier == Tier::kFp16) {
    PrefetchLines(keys ? FpK(w, head) : FpV(w, head), std::min<int64_t>(int64_t{window_} * hd * 2, 2048));
    return;
  }
  const uint8_t* block = store_.data(WindowStore::Kind::kQuant, w.block);
  const int64_t rows = int64_t{window_} * qlayout_.row_bytes;
  if (keys) {
    PrefetchLines(block + qlayout_.key_codes + head * rows, rows);
    PrefetchLines(block + qlayout_.key_scales + int64_t{head} * hd * 2, hd * 2);
    PrefetchLines(block + qlayout_.key_zeros + int64_t{head} * hd * 2, hd * 2);
  } else {
    const int64_t params = int64_t{window_} * qlayout_.value_groups * 2;
    PrefetchLines(block + qlayout_.value_codes + head * rows, rows);
    PrefetchLines(block + qlayout_.value_scales + head * params, params);
    PrefetchLines(block + qlayout_.value_zeros + head * params, params);
  }
}

void TieredCache::ScoreRange(int layer, int head, int64_t begin, int64_t end, const float* q,
                             int n_q, float* scores, int64_t ld, float scale) const {
  const LayerState& l = layers_[layer];
  const int hd = geo_.head_dim;
  const int sink = SinkTokens(l);
  Fp16Run run(hd);
  const auto flush = [&](int64_t at, const uint16_t* rows, int64_t n) {
    ScoreFp16Keys(q, n_q, rows, hd, n, hd, scale, scores + (at - begin), ld);
  };
  int64_t r = begin;
  if (r < sink) {
    const int64_t n = std::min<int64_t>(end, sink) - r;
    run.Add(r, SinkK(l, head) + r * hd, n, flush);
    r += n;
  }
  while (r < end) {
    const int64_t k = (r - sink) / window_;
    const int o = static_cast<int>((r - sink) % window_);
    const int len = static_cast<int>(std::min<int64_t>(window_ - o, end - r));
    const WindowRecord& w = l.windows[k];
    if (o == 0) PrefetchWindow(l, k + kPrefetchWindows, head, /*keys=*/true);
    if (w.tier == Tier::kFp16) {
      run.Add(r, FpK(w, head) + o * hd, len, flush);
    } else {
      run.Finish(flush);
      ScoreQuantKeys(qlayout_, store_.data(WindowStore::Kind::kQuant, w.block), head, o, o + len,
                     pos_.data() + FirstToken(w.index) + o, rope_, q, n_q, scale,
                     scores + (r - begin), ld);
    }
    r += len;
  }
  run.Finish(flush);
}

void TieredCache::AccumulateRange(int layer, int head, int64_t begin, int64_t end, const float* p,
                                  int n_q, int64_t ld, float* acc) const {
  const LayerState& l = layers_[layer];
  const int hd = geo_.head_dim;
  const int sink = SinkTokens(l);
  Fp16Run run(hd);
  const auto flush = [&](int64_t at, const uint16_t* rows, int64_t n) {
    AccumulateFp16Values(p + (at - begin), n_q, ld, rows, hd, n, hd, acc);
  };
  int64_t r = begin;
  if (r < sink) {
    const int64_t n = std::min<int64_t>(end, sink) - r;
    run.Add(r, SinkV(l, head) + r * hd, n, flush);
    r += n;
  }
  while (r < end) {
    const int64_t k = (r - sink) / window_;
    const int o = static_cast<int>((r - sink) % window_);
    const int len = static_cast<int>(std::min<int64_t>(window_ - o, end - r));
    const WindowRecord& w = l.windows[k];
    if (o == 0) PrefetchWindow(l, k + kPrefetchWindows, head, /*keys=*/false);
    if (w.tier == Tier::kFp16) {
      run.Add(r, FpV(w, head) + o * hd, len, flush);
    } else {
      run.Finish(flush);
      AccumulateQuantValues(qlayout_, store_.data(WindowStore::Kind::kQuant, w.block), head, o,
                            o + len, p + (r - begin), n_q, ld, acc);
    }
    r += len;
  }
  run.Finish(flush);
}

void TieredCache::Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
                         ThreadPool& pool) {
  LayerState& l = layers_[layer];
  if (static_cast<int>(visible_.size()) < n) visible_.resize(n);
  for (int i = 0; i < n; ++i) {
    const int64_t logical = std::upper_bound(pos_.data(), pos_.data() + l.count, pos[i]) -
                            pos_.data();
    visible_[i] = ResidentPrefix(l, logical);
  }
  auto score = [&](int head, int64_t begin, int64_t end, const float* qg, int n_q,
                   float* scores, int64_t ld, float scale) {
    ScoreRange(layer, head, begin, end, qg, n_q, scores, ld, scale);
  };
  auto accumulate = [&](int head, int64_t begin, int64_t end, const float* p, int n_q,
                        int64_t ld, float* acc) {
    AccumulateRange(layer, head, begin, end, p, n_q, ld, acc);
  };
  if (scoring_) {
    mass_.Begin(SinkTokens(l), 1 + static_cast<int64_t>(l.windows.size()));
    GroupedAttentionOverPrefix(geo_, n, visible_.data(), q, out, pool, score, accumulate, mass_);
    mass_.Finish();
    UpdateScores(l, n, visible_.data());
  } else {
    NoAttentionObserver none;
    GroupedAttentionOverPrefix(geo_, n, visible_.data(), q, out, pool, score, accumulate, none);
  }
  if (remember_queries_) RememberQueries(l, n, pos, q);
}

void TieredCache::UpdateScores(LayerState& l, int n, const int64_t* visible) {
  const float* mass = mass_.mass();
  const float* last = mass_.last_mass();
  const bool decay = config_.score == ScoreMode::kDecay;
  const bool normalized = config_.score == ScoreMode::kNormalized;
  const float factor = decay ? static_cast<float>(std::pow(config_.score_decay, n)) : 1.0f;
  const int sink = SinkTokens(l);
  for (size_t k = 0; k < l.windows.size(); ++k) {
    WindowRecord& w = l.windows[k];
    w.mass_sum = decay ? w.mass_sum * factor + mass[1 + k] : w.mass_sum + mass[1 + k];
    w.last_mass = last[1 + k];
    if (normalized) {
      // Queries that saw at least the window's first key (visible is non-decreasing).
      const int64_t first = sink + static_cast<int64_t>(k) * window_;
      w.observers += static_cast<float>(visible + n - std::upper_bound(visible, visible + n, first));
    }
  }
}

void TieredCache::RememberQueries(LayerState& l, int n, const int32_t* pos, const float* q) {
  const int64_t q_floats = static_cast<int64_t>(geo_.n_heads) * geo_.head_dim;
  const int keep = std::min(n, config_.snapkv_window);
  for (int i = n - keep; i < n; ++i) {
    std::copy(q + i * q_floats, q + (i + 1) * q_floats, l.obs_queries.begin() + l.obs_next * q_floats);
    l.obs_pos[l.obs_next] = pos[i];
    l.obs_next = (l.obs_next + 1) % config_.snapkv_window;
    l.obs_filled = std::min(l.obs_filled + 1, config_.snapkv_window);
  }
}

void TieredCache::ComputeObservation(int layer, std::vector<float>* tokens) const {
  const LayerState& l = layers_[layer];
  const int hd = geo_.head_dim;
  const int group = geo_.n_heads / geo_.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float per_head = 1.0f / static_cast<float>(group);
  const int64_t n_tokens = ResidentTokens(l);
  tokens->assign(static_cast<size_t>(n_tokens) * geo_.n_kv_heads, 0.0f);  // [kv head][token]
  thread_local std::vector<float> scores;
  for (int s = 0; s < l.obs_filled; ++s) {
    const int32_t qpos = l.obs_pos[s];
    const int64_t logical =
        std::upper_bound(pos_.data(), pos_.data() + l.count, qpos) - pos_.data();
    const int64_t visible = ResidentPrefix(l, logical);
    if (visible == 0) continue;
    scores.resize(static_cast<size_t>(group) * visible);
    const float* qs = l.obs_queries.data() + static_cast<int64_t>(s) * geo_.n_heads * hd;
    for (int h = 0; h < geo_.n_kv_heads; ++h) {
      ScoreRange(layer, h, 0, visible, qs + static_cast<int64_t>(h) * group * hd, group,
                 scores.data(), visible, scale);
      for (int g = 0; g < group; ++g) {
        float* row = scores.data() + static_cast<int64_t>(g) * visible;
        const float inv = per_head / ExpShiftSum(row, visible, MaxOf(row, visible));
        float* out = tokens->data() + h * n_tokens;
        for (int64_t j = 0; j < visible; ++j) out[j] += row[j] * inv;
      }
    }
  }
}

void TieredCache::DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                             std::vector<int32_t>* positions) const {
  const LayerState& l = layers_[layer];
  const int hd = geo_.head_dim, n_kv = geo_.n_kv_heads;
  const int64_t n = ResidentTokens(l);
  const int64_t row = int64_t{n_kv} * hd;
  keys->assign(n * row, 0.0f);
  values->assign(n * row, 0.0f);
  positions->assign(n, 0);
  const int sink = SinkTokens(l);
  for (int t = 0; t < sink; ++t) {
    (*positions)[t] = pos_[t];
    for (int h = 0; h < n_kv; ++h) {
      Fp16ToFp32Row(SinkK(l, h) + t * hd, keys->data() + t * row + h * hd, hd);
      Fp16ToFp32Row(SinkV(l, h) + t * hd, values->data() + t * row + h * hd, hd);
    }
  }
  std::vector<float> rows(static_cast<size_t>(window_) * hd);
  for (size_t k = 0; k < l.windows.size(); ++k) {
    const WindowRecord& w = l.windows[k];
    const int tokens = WindowTokens(l, w);
    const int64_t r0 = sink + static_cast<int64_t>(k) * window_;
    const int32_t* wpos = pos_.data() + FirstToken(w.index);
    for (int t = 0; t < tokens; ++t) (*positions)[r0 + t] = wpos[t];
    for (int h = 0; h < n_kv; ++h) {
      if (w.tier == Tier::kFp16) {
        for (int t = 0; t < tokens; ++t) {
          Fp16ToFp32Row(FpK(w, h) + t * hd, keys->data() + (r0 + t) * row + h * hd, hd);
          Fp16ToFp32Row(FpV(w, h) + t * hd, values->data() + (r0 + t) * row + h * hd, hd);
        }
        continue;
      }
      const uint8_t* block = store_.data(WindowStore::Kind::kQuant, w.block);
      DequantizeRotatedKeys(qlayout_, block, h, 0, tokens, wpos, rope_, rows.data());
      for (int t = 0; t < tokens; ++t) {
        std::copy_n(rows.data() + t * hd, hd, keys->data() + (r0 + t) * row + h * hd);
      }
      DequantizeValueRows(qlayout_, block, h, 0, tokens, rows.data());
      for (int t = 0; t < tokens; ++t) {
        std::copy_n(rows.data() + t * hd, hd, values->data() + (r0 + t) * row + h * hd);
      }
    }
  }
}

void TieredCache::HoldObservation() {
  for (LayerState& l : layers_) {
    l.obs_queries.resize(static_cast<size_t>(config_.snapkv_window) * geo_.n_heads * geo_.head_dim);
    l.obs_pos.resize(config_.snapkv_window);
    l.obs_filled = l.obs_next = 0;
  }
  obs_held_ = true;
}

void TieredCache::ReleaseObservation() {
  for (LayerState& l : layers_) {
    l.obs_queries = {};
    l.obs_pos = {};
    l.obs_filled = l.obs_next = 0;
  }
  obs_held_ = false;
  remember_queries_ = false;
}

// A prompt's queries are observed from its first batch on; generated tokens' are not.
void TieredCache::BeginBatch(BatchKind kind) {
  remember_queries_ = observing_ && kind != BatchKind::kGenerated;
  if (remember_queries_ && !obs_held_) HoldObservation();
}

}  // namespace qevict
