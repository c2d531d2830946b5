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
    case Tier::kCold: return "cold";
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
  recall.assign(context.layers.size(), {});
  infeasible = false;
  note.clear();
}

TieredCache::TieredCache(const KvConfig& config, const KvGeometry& geometry, const Rope& rope,
                         std::unique_ptr<Policy> policy)
    : config_(config),
      geo_(geometry),
      rope_(rope),
      policy_(std::move(policy)),
      qlayout_(QuantLayout::Make(geometry.n_kv_heads, config.window, geometry.head_dim,
                                 config.bits, config.value_group)),
      store_(config, geometry, qlayout_, policy_->keeps_cold()),
      table_(config, geometry.n_layers, geometry.max_tokens),
      observation_(geometry.n_layers, config.snapkv_window, geometry.n_heads, geometry.head_dim),
      ledger_(config_, geo_, qlayout_, table_, store_, observation_),
      query_(false),
      recall_(policy_->keeps_cold(), config.cold_digest, config.recall_scan, config.recall_candidates,
              config.recall_shared) {
  config_.Validate();
  QEVICT_CHECK(policy_ != nullptr);
  QEVICT_CHECK(geo_.n_layers > 0 && geo_.n_kv_heads > 0 && geo_.head_dim > 0 &&
               geo_.max_tokens > 0 && geo_.n_heads % geo_.n_kv_heads == 0);
  QEVICT_CHECK(rope_.max_positions() > 0);
  mass_.Configure(geo_, config_.window, table_.max_windows());
  query_.set_wanted(policy_->wants_observation());
  external_ = MakeWindowScoreSource(config_, geo_.n_layers, policy_->wants_external_scores());
  if (cold_tier()) {
    recall_.Configure(geo_.n_layers, geo_.n_heads, geo_.head_dim);
    const DigestGeometry dg{geo_.n_kv_heads, geo_.head_dim, config_.window};
    const int group = config_.cold_digest_group;
    if (group > 1 && DigestBytes(config_.cold_digest, dg) !=
                         DigestBytes(config_.cold_digest,
                                     DigestGeometry{dg.n_kv_heads, dg.head_dim, group * dg.window_tokens})) {
      throw Error(std::string("--kv-cold-digest-group ") + std::to_string(group) +
                  " needs a digest whose size does not grow with the window; " +
                  DigestKindName(config_.cold_digest) +
                  " grows (pick another --kv-cold-digest, or --kv-cold-digest-group 1)");
    }
    table_.set_digest_bytes(DigestBytes(config_.cold_digest, dg));
    table_.set_digest_group(group);
    recall_.set_disk(store_.disk());
  }
}

TieredCache::~TieredCache() = default;

uint16_t* TieredCache::SinkK(const LayerWindows& l, int head) const {
  return reinterpret_cast<uint16_t*>(store_.data(WindowStore::Kind::kSink, l.sink_block)) +
         static_cast<int64_t>(head) * config_.sinks * geo_.head_dim;
}
uint16_t* TieredCache::SinkV(const LayerWindows& l, int head) const {
  return SinkK(l, head) + static_cast<int64_t>(geo_.n_kv_heads) * config_.sinks * geo_.head_dim;
}
uint16_t* TieredCache::FpK(const WindowRecord& w, int head) const {
  return reinterpret_cast<uint16_t*>(store_.data(WindowStore::Kind::kFp16, w.block)) +
         static_cast<int64_t>(head) * config_.window * geo_.head_dim;
}
uint16_t* TieredCache::FpV(const WindowRecord& w, int head) const {
  return FpK(w, head) + static_cast<int64_t>(geo_.n_kv_heads) * config_.window * geo_.head_dim;
}

// ---- run ------------------------------------------------------------------------------------

void TieredCache::BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  ThrowIfFailed();
  store_.Reset();
  table_.Reset();
  external_->Clear();
  ledger_.Reset();
  clock_ = RouteClock{};

  SetBudget(prompt_tokens, max_new_tokens);
  policy_->BeginRun();
  observation_.Release();
  recall_.Forget();
  // Callers that do not announce batches (BeginBatch) observe every query from the start.
  if (observing()) {
    observation_.Hold();
    observation_.set_remembering(true);
  }
}

void TieredCache::ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  ThrowIfFailed();
  SetBudget(n_tokens() + std::max<int64_t>(0, prompt_tokens), max_new_tokens);
}

void TieredCache::SetBudget(int64_t prompt_tokens, int64_t max_new_tokens) {
  ledger_.SetBudget(prompt_tokens, max_new_tokens);
}

// A prompt's queries are observed from its first batch on; generated tokens' are not.
void TieredCache::BeginBatch(BatchKind kind) {
  decoding_ = kind == BatchKind::kGenerated;
  prompt_end_batch_ = kind == BatchKind::kPromptEnd;
  observation_.set_remembering(observing() && kind != BatchKind::kGenerated);
  if (observation_.remembering() && !observation_.held()) observation_.Hold();
}

void TieredCache::Store(int layer, int n, const int32_t* pos, const float* k, const float* v) {
  ThrowIfFailed();
  LayerWindows& l = table_.layer(layer);
  if (l.count + n > geo_.max_tokens) {
    throw Error("KV cache is full: " + std::to_string(l.count + n) +
                " tokens exceed the context of " + std::to_string(geo_.max_tokens));
  }
  const int hd = geo_.head_dim, n_kv = geo_.n_kv_heads;
  const int sinks = config_.sinks, window = config_.window;
  thread_local std::vector<float> rotated;
  rotated.resize(static_cast<size_t>(n_kv) * hd);
  for (int i = 0; i < n; ++i) {
    const int64_t t = l.count;
    table_.RecordPosition(layer, t, pos[i]);
    const float* ki = k + static_cast<int64_t>(i) * n_kv * hd;
    const float* vi = v + static_cast<int64_t>(i) * n_kv * hd;
    std::copy(ki, ki + rotated.size(), rotated.begin());
    rope_.Apply(rotated.data(), n_kv, hd, pos[i]);
    // Destination rows: the sink block, or the window being filled (opened at its first token).
    uint16_t* k_base;
    uint16_t* v_base;
    int64_t rows, row;  // rows per head in the block, and this token's row
    if (t < sinks) {
      if (l.sink_block == BlockPool::kNoBlock) l.sink_block = store_.Allocate(WindowStore::Kind::kSink);
      k_base = SinkK(l, 0);
      v_base = SinkV(l, 0);
      rows = sinks;
      row = t;
    } else {
      row = (t - sinks) % window;
      if (row == 0) {
        l.windows.push_back(WindowRecord{store_.Allocate(WindowStore::Kind::kFp16), -1,
                                         static_cast<int32_t>((t - sinks) / window),
                                         Tier::kFp16, 0.0f, 0.0f, 0.0f});
      }
      k_base = FpK(l.windows.back(), 0);
      v_base = FpV(l.windows.back(), 0);
      rows = window;
    }
    for (int h = 0; h < n_kv; ++h) {
      const int64_t offset = (h * rows + row) * hd;
      Fp32ToFp16Row(rotated.data() + h * hd, k_base + offset, hd);
      Fp32ToFp16Row(vi + h * hd, v_base + offset, hd);
    }
    ++l.count;
  }
  ledger_.UpdatePeaks();
}

void TieredCache::EndBatch(BatchKind kind, ThreadPool& pool) {
  ThrowIfFailed();
  if (kind != BatchKind::kGenerated) ledger_.NotePromptBatch();
  const std::optional<int64_t>& budget = ledger_.budget();
  const int64_t stored = table_.layers().back().count;
  bool route = false;
  switch (kind) {
    case BatchKind::kPromptChunk:
      // Bounded prefill: with a budget, route once a chunk's worth of prompt has arrived since
      // the last step, so the cache never holds more than the budget plus one chunk.
      route = config_.prefill_chunk > 0 && budget &&
              stored - clock_.tokens_at_route >= config_.prefill_chunk;
      break;
    case BatchKind::kPromptEnd:
      route = true;
      break;
    case BatchKind::kGenerated:
      ++clock_.since_route;
      // Early when the next token would not fit, unless the last step already could not meet
      // the budget (kivi, a budget below the floor): then routing each token would not help.
      route = !clock_.routed || clock_.since_route >= config_.route_every ||
              (budget && !clock_.over_budget &&
               ledger_.ResidentBytes() + ledger_.NextTokenGrowth() > *budget);
      break;
  }
  clock_.last_batch = kind;
  if (route && !for_forks_) {
    KillOnFault([&] { Route(kind, pool); });
    clock_.tokens_at_route = table_.layers().back().count;
  }
  ledger_.AfterBatch(clock_.routed);
}

void TieredCache::ReleaseWindow(WindowRecord& w) {
  if (w.tier != Tier::kEvicted) store_.Free(WindowStore::KindOf(w.tier), w.block);
  if (w.cold_slot >= 0) store_.FreeDisk(w.cold_slot);
  w.cold_slot = -1;
  w.block = BlockPool::kNoBlock;
  w.tier = Tier::kEvicted;
}

}  // namespace qevict
