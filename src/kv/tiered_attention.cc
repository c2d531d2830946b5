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

void TieredCache::PrefetchWindow(const LayerWindows& l, size_t k, int head, bool keys) const {
  if (k >= l.windows.size()) return;
  const WindowRecord& w = l.windows[k];
  const int hd = geo_.head_dim;
  if (w.tier == Tier::kFp16) {
    PrefetchLines(keys ? FpK(w, head) : FpV(w, head),
                  std::min<int64_t>(int64_t{config_.window} * hd * 2, 2048));
    return;
  }
  const uint8_t* block = store_.data(WindowStore::Kind::kQuant, w.block);
  const int64_t rows = int64_t{config_.window} * qlayout_.row_bytes;
  if (keys) {
    PrefetchLines(block + qlayout_.key_codes + head * rows, rows);
    PrefetchLines(block + qlayout_.key_scales + int64_t{head} * hd * 2, hd * 2);
    PrefetchLines(block + qlayout_.key_zeros + int64_t{head} * hd * 2, hd * 2);
  } else {
    const int64_t params = int64_t{config_.window} * qlayout_.value_groups * 2;
    PrefetchLines(block + qlayout_.value_codes + head * rows, rows);
    PrefetchLines(block + qlayout_.value_scales + head * params, params);
    PrefetchLines(block + qlayout_.value_zeros + head * params, params);
  }
}

void TieredCache::ScoreRange(int layer, int head, int64_t begin, int64_t end, const float* q,
                             int n_q, float* scores, int64_t ld, float scale) const {
  const LayerWindows& l = table_.layer(layer);
  const int hd = geo_.head_dim;
  const int sink = table_.SinkTokens(l);
  const int window = config_.window;
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
    const int64_t k = (r - sink) / window;
    const int o = static_cast<int>((r - sink) % window);
    const int len = static_cast<int>(std::min<int64_t>(window - o, end - r));
    const WindowRecord& w = l.windows[k];
    if (o == 0) PrefetchWindow(l, k + kPrefetchWindows, head, /*keys=*/true);
    if (w.tier == Tier::kFp16) {
      run.Add(r, FpK(w, head) + o * hd, len, flush);
    } else {
      run.Finish(flush);
      ScoreQuantKeys(qlayout_, store_.data(WindowStore::Kind::kQuant, w.block), head, o, o + len,
                     table_.positions() + table_.FirstToken(w.index) + o, rope_, q, n_q, scale,
                     scores + (r - begin), ld);
    }
    r += len;
  }
  run.Finish(flush);
}

void TieredCache::AccumulateRange(int layer, int head, int64_t begin, int64_t end, const float* p,
                                  int n_q, int64_t ld, float* acc) const {
  const LayerWindows& l = table_.layer(layer);
  const int hd = geo_.head_dim;
  const int sink = table_.SinkTokens(l);
  const int window = config_.window;
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
    const int64_t k = (r - sink) / window;
    const int o = static_cast<int>((r - sink) % window);
    const int len = static_cast<int>(std::min<int64_t>(window - o, end - r));
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
  ThrowIfFailed();
  LayerWindows& l = table_.layer(layer);
  // A later prompt (a question after the document) reads the windows it asks for: recalled
  // before it attends, in this layer (KvConfig::recall_prompt; the prompt's end re-plans them).
  // So does the last batch of a first prompt read in chunks (bounded prefill), whose earlier
  // chunks sent windows to the cold tier: a question at the end of a long prompt.
  const bool later_prompt = clock_.first_prompt_end_done || prompt_end_batch_;
  if (config_.recall_prompt && cold_tier() && !decoding_ && later_prompt && !l.cold.empty() &&
      !for_forks_) {
    KillOnFault([&] { RecallForPrompt(layer, n, pos, q, pool); });
  }
  if (static_cast<int>(visible_.size()) < n) visible_.resize(n);
  for (int i = 0; i < n; ++i) visible_[i] = table_.VisibleTo(l, pos[i]);
  auto score = [&](int head, int64_t begin, int64_t end, const float* qg, int n_q,
                   float* scores, int64_t ld, float scale) {
    ScoreRange(layer, head, begin, end, qg, n_q, scores, ld, scale);
  };
  auto accumulate = [&](int head, int64_t begin, int64_t end, const float* p, int n_q,
                        int64_t ld, float* acc) {
    AccumulateRange(layer, head, begin, end, p, n_q, ld, acc);
  };
  if (scoring()) {
    WindowMassObserver& mass = mass_.observer();
    mass.Begin(table_.SinkTokens(l), 1 + static_cast<int64_t>(l.windows.size()));
    GroupedAttentionOverPrefix(geo_, n, visible_.data(), q, out, pool, score, accumulate, mass);
    mass.Finish();
    mass_.Accumulate(table_, l, n, visible_.data());
  } else {
    NoAttentionObserver none;
    GroupedAttentionOverPrefix(geo_, n, visible_.data(), q, out, pool, score, accumulate, none);
  }
  if (observation_.remembering()) observation_.Remember(layer, n, pos, q);
  if (decoding_ && cold_tier()) recall_.RememberQuery(layer, n, pos, q);
}

void TieredCache::DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                             std::vector<int32_t>* positions) const {
  const LayerWindows& l = table_.layer(layer);
  const int hd = geo_.head_dim, n_kv = geo_.n_kv_heads;
  const int window = config_.window;
  const int64_t n = table_.ResidentTokens(l);
  const int64_t row = int64_t{n_kv} * hd;
  keys->assign(n * row, 0.0f);
  values->assign(n * row, 0.0f);
  positions->assign(n, 0);
  const int sink = table_.SinkTokens(l);
  for (int t = 0; t < sink; ++t) {
    (*positions)[t] = table_.position(t);
    for (int h = 0; h < n_kv; ++h) {
      Fp16ToFp32Row(SinkK(l, h) + t * hd, keys->data() + t * row + h * hd, hd);
      Fp16ToFp32Row(SinkV(l, h) + t * hd, values->data() + t * row + h * hd, hd);
    }
  }
  std::vector<float> rows(static_cast<size_t>(window) * hd);
  for (size_t k = 0; k < l.windows.size(); ++k) {
    const WindowRecord& w = l.windows[k];
    const int tokens = table_.WindowTokens(l, w);
    const int64_t r0 = sink + static_cast<int64_t>(k) * window;
    const int32_t* wpos = table_.positions() + table_.FirstToken(w.index);
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

}  // namespace qevict
