#include "kv/tiered_cache.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "util/error.h"

namespace qevict {

const char* TierName(Tier tier) {
  switch (tier) {
    case Tier::kFp16: return "fp16";
    case Tier::kQuant: return "quant";
    default: return "evicted";
  }
}

void Plan::ResetTo(const RoutingContext& context) {
  targets.resize(context.layers.size());
  for (size_t l = 0; l < context.layers.size(); ++l) {
    const auto& band = context.layers[l].windows;
    targets[l].resize(band.size());
    for (size_t j = 0; j < band.size(); ++j) targets[l][j] = band[j].tier;
  }
  infeasible = false;
  note.clear();
}

TieredCache::TieredCache(const KvConfig& config, const KvGeometry& geometry, const Rope& rope,
                         std::unique_ptr<Policy> policy)
    : config_(config),
      geo_(geometry),
      rope_(rope),
      policy_(std::move(policy)),
      window_(config.window),
      sinks_(config.sinks),
      recent_(config.recent),
      qlayout_(QuantLayout::Make(geometry.n_kv_heads, config.window, geometry.head_dim,
                                 config.bits, config.value_group)),
      fp_block_bytes_(WindowStore::FpBlockBytes(config, geometry)),
      sink_block_bytes_(WindowStore::SinkBlockBytes(config, geometry)),
      max_windows_((geometry.max_tokens + config.window - 1) / config.window + 1),
      store_(config, geometry, qlayout_, int64_t{geometry.n_layers} * max_windows_) {
  config_.Validate();
  QEVICT_CHECK(policy_ != nullptr);
  QEVICT_CHECK(geo_.n_layers > 0 && geo_.n_kv_heads > 0 && geo_.head_dim > 0 &&
               geo_.max_tokens > 0 && geo_.n_heads % geo_.n_kv_heads == 0);
  QEVICT_CHECK(rope_.max_positions() > 0);
  layers_.resize(geo_.n_layers);
  for (LayerState& l : layers_) l.windows.reserve(max_windows_);
  pos_.resize(geo_.max_tokens);
  mass_.Configure(geo_.n_heads, geo_.n_kv_heads, window_, max_windows_ + 1);
}

TieredCache::~TieredCache() = default;

// ---- layout -------------------------------------------------------------------------------

int TieredCache::SinkTokens(const LayerState& l) const {
  return static_cast<int>(std::min<int64_t>(l.count, sinks_));
}

int TieredCache::WindowTokens(const LayerState& l, const WindowRecord& w) const {
  return static_cast<int>(std::min<int64_t>(window_, l.count - FirstToken(w.index)));
}

int64_t TieredCache::ResidentTokens(const LayerState& l) const {
  int64_t n = SinkTokens(l);
  if (!l.windows.empty()) {
    n += static_cast<int64_t>(l.windows.size() - 1) * window_ + WindowTokens(l, l.windows.back());
  }
  return n;
}

// Resident keys among the first `logical` stored tokens (a prefix of the resident order).
int64_t TieredCache::ResidentPrefix(const LayerState& l, int64_t logical) const {
  if (logical <= sinks_) return std::min<int64_t>(logical, SinkTokens(l));
  // Windows that start before `logical`: index < ceil((logical - S) / W).
  const int64_t limit = (logical - sinks_ + window_ - 1) / window_;
  const auto end = std::lower_bound(
      l.windows.begin(), l.windows.end(), limit,
      [](const WindowRecord& w, int64_t index) { return w.index < index; });
  const int64_t k = end - l.windows.begin();
  if (k == 0) return sinks_;
  const int64_t first = FirstToken(l.windows[k - 1].index);
  return sinks_ + (k - 1) * window_ + std::min<int64_t>(window_, logical - first);
}

size_t TieredCache::BandSize(const LayerState& l) const {
  const int64_t old_tokens = l.count - recent_ - sinks_;
  const int64_t limit = old_tokens > 0 ? old_tokens / window_ : 0;  // windows fully out of recent
  return std::lower_bound(l.windows.begin(), l.windows.end(), limit,
                          [](const WindowRecord& w, int64_t index) { return w.index < index; }) -
         l.windows.begin();
}

float TieredCache::ScoreOf(const WindowRecord& w) const {
  if (config_.score == ScoreMode::kNormalized) {
    return w.observers > 0.0f ? w.mass_sum / w.observers : 0.0f;
  }
  return w.mass_sum;
}

uint16_t* TieredCache::SinkK(const LayerState& l, int head) const {
  return reinterpret_cast<uint16_t*>(store_.data(WindowStore::Kind::kSink, l.sink_block)) +
         static_cast<int64_t>(head) * sinks_ * geo_.head_dim;
}
uint16_t* TieredCache::SinkV(const LayerState& l, int head) const {
  return SinkK(l, head) + static_cast<int64_t>(geo_.n_kv_heads) * sinks_ * geo_.head_dim;
}
uint16_t* TieredCache::FpK(const WindowRecord& w, int head) const {
  return reinterpret_cast<uint16_t*>(store_.data(WindowStore::Kind::kFp16, w.block)) +
         static_cast<int64_t>(head) * window_ * geo_.head_dim;
}
uint16_t* TieredCache::FpV(const WindowRecord& w, int head) const {
  return FpK(w, head) + static_cast<int64_t>(geo_.n_kv_heads) * window_ * geo_.head_dim;
}

// ---- run ------------------------------------------------------------------------------------

void TieredCache::BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  store_.Reset();
  for (LayerState& l : layers_) {
    l.count = 0;
    l.sink_block = BlockPool::kNoBlock;
    l.windows.clear();
    l.evicted = 0;
    l.obs_filled = l.obs_next = 0;
    l.external = {};
  }
  priors_done_ = false;
  stats_ = KvStats{};
  peak_reserved_ = 0;
  tokens_at_route_ = 0;
  routed_ = false;
  over_budget_ = false;
  since_route_ = 0;
  batch_peak_ = 0;
  sum_resident_ = sum_fp16_ = sum_quant_ = 0;
  samples_ = 0;

  SetBudget(prompt_tokens, max_new_tokens);
  policy_->BeginRun();
  ReleaseObservation();
  // Callers that do not announce batches (BeginBatch) observe every query from the start.
  if (observing_) {
    HoldObservation();
    remember_queries_ = true;
  }
}

void TieredCache::ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  SetBudget(n_tokens() + std::max<int64_t>(0, prompt_tokens), max_new_tokens);
}

void TieredCache::Store(int layer, int n, const int32_t* pos, const float* k, const float* v) {
  LayerState& l = layers_[layer];
  if (l.count + n > geo_.max_tokens) {
    throw Error("KV cache is full: " + std::to_string(l.count + n) +
                " tokens exceed the context of " + std::to_string(geo_.max_tokens));
  }
  const int hd = geo_.head_dim, n_kv = geo_.n_kv_heads;
  thread_local std::vector<float> rotated;
  rotated.resize(static_cast<size_t>(n_kv) * hd);
  for (int i = 0; i < n; ++i) {
    const int64_t t = l.count;
    if (layer == 0) {
      QEVICT_CHECK(t == 0 || pos[i] > pos_[t - 1]);
      pos_[t] = pos[i];
    } else {
      QEVICT_CHECK(t < layers_.front().count && pos_[t] == pos[i]);
    }
    const float* ki = k + static_cast<int64_t>(i) * n_kv * hd;
    const float* vi = v + static_cast<int64_t>(i) * n_kv * hd;
    std::copy(ki, ki + rotated.size(), rotated.begin());
    rope_.Apply(rotated.data(), n_kv, hd, pos[i]);
    // Destination rows: the sink block, or the window being filled (opened at its first token).
    uint16_t* k_base;
    uint16_t* v_base;
    int64_t rows, row;  // rows per head in the block, and this token's row
    if (t < sinks_) {
      if (l.sink_block == BlockPool::kNoBlock) l.sink_block = store_.Allocate(WindowStore::Kind::kSink);
      k_base = SinkK(l, 0);
      v_base = SinkV(l, 0);
      rows = sinks_;
      row = t;
    } else {
      row = (t - sinks_) % window_;
      if (row == 0) {
        l.windows.push_back(WindowRecord{store_.Allocate(WindowStore::Kind::kFp16), -1,
                                         static_cast<int32_t>((t - sinks_) / window_),
                                         Tier::kFp16, 0.0f, 0.0f, 0.0f});
      }
      k_base = FpK(l.windows.back(), 0);
      v_base = FpV(l.windows.back(), 0);
      rows = window_;
    }
    for (int h = 0; h < n_kv; ++h) {
      const int64_t offset = (h * rows + row) * hd;
      Fp32ToFp16Row(rotated.data() + h * hd, k_base + offset, hd);
      Fp32ToFp16Row(vi + h * hd, v_base + offset, hd);
    }
    ++l.count;
  }
  UpdatePeaks();
}

void TieredCache::EndBatch(BatchKind kind, ThreadPool& pool) {
  if (kind != BatchKind::kGenerated) {
    stats_.prefill_peak_bytes = std::max(stats_.prefill_peak_bytes, batch_peak_);
  }
  bool route = false;
  switch (kind) {
    case BatchKind::kPromptChunk:
      // Bounded prefill: with a budget, route once a chunk's worth of prompt has arrived since
      // the last step, so the cache never holds more than the budget plus one chunk.
      route = config_.prefill_chunk > 0 && budget_ &&
              layers_.back().count - tokens_at_route_ >= config_.prefill_chunk;
      break;
    case BatchKind::kPromptEnd:
      route = true;
      break;
    case BatchKind::kGenerated:
      ++since_route_;
      // Early when the next token would not fit, unless the last step already could not meet
      // the budget (kivi, a budget below the floor): then routing each token would not help.
      route = !routed_ || since_route_ >= config_.route_every ||
              (budget_ && !over_budget_ && resident_bytes() + NextTokenGrowth() > *budget_);
      break;
  }
  last_batch_ = kind;
  if (route && !for_forks_) {
    Route(kind, pool);
    tokens_at_route_ = layers_.back().count;
  }
  batch_peak_ = resident_bytes();
  if (routed_) {
    sum_resident_ += static_cast<double>(resident_bytes());
    sum_fp16_ += static_cast<double>(store_.fp16_bytes());
    sum_quant_ += static_cast<double>(store_.quant_bytes());
    ++samples_;
  }
}

WindowView TieredCache::View(int layer) const {
  const LayerState& l = layers_[layer];
  WindowView view;
  view.layer = layer;
  view.sink_tokens = SinkTokens(l);
  view.window = window_;
  const int64_t total = l.count > sinks_ ? (l.count - sinks_ + window_ - 1) / window_ : 0;
  const size_t band = BandSize(l);
  view.windows.resize(total);
  size_t next = 0;
  for (int64_t index = 0; index < total; ++index) {
    WindowInfo& info = view.windows[index];
    info.index = index;
    info.first_token = FirstToken(index);
    info.first_pos = pos_[info.first_token];
    info.n_tokens = static_cast<int>(std::min<int64_t>(window_, l.count - info.first_token));
    if (next < l.windows.size() && l.windows[next].index == index) {
      const WindowRecord& w = l.windows[next];
      info.tier = w.tier;
      info.in_band = next < band;
      info.score = ScoreOf(w);
      info.last_mass = w.last_mass;
      ++next;
    } else {
      info.tier = Tier::kEvicted;
      info.in_band = true;
    }
  }
  return view;
}

void TieredCache::ReleaseWindow(WindowRecord& w) {
  if (w.tier != Tier::kEvicted) store_.Free(WindowStore::KindOf(w.tier), w.block);
  if (w.cold_slot >= 0) store_.cold()->Free(w.cold_slot);
  w.cold_slot = -1;
  w.block = BlockPool::kNoBlock;
  w.tier = Tier::kEvicted;
}

}  // namespace qevict
