// Routing steps of the tiered cache: describe each layer's band and budget to the policy, check
// its plan, and apply it (evict, demote, promote), returning memory before taking any so the
// resident bytes move monotonically from before to after.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/attention.h"
#include "kv/quant_attention.h"
#include "kv/tiered_cache.h"
#include "kv/window_priors.h"
#include "util/error.h"

namespace qevict {

void TieredCache::Route(BatchKind trigger, ThreadPool& pool) {
  const int n_layers = geo_.n_layers;
  const bool unlimited = !budget_;
  const int64_t record = static_cast<int64_t>(sizeof(WindowRecord));
  const int64_t fp_cost = fp_block_bytes_ + record;
  const int64_t q_cost = qlayout_.bytes + record;
  const int64_t reserve = NextTokenGrowth();

  // The observation of the latest prompt queries (the prompt's end, or a bounded prefill's
  // chunk end). The buffers it came from are freed before the budget is shared out, so they
  // never take budget from the windows; the next prompt batch allocates them again.
  band_views_.resize(n_layers);
  layer_bands_.resize(n_layers);
  observation_.resize(n_layers);
  observation_offsets_.resize(n_layers);
  const bool observe = observing_ && obs_held_ && trigger != BatchKind::kGenerated;
  if (observe) {
    pool.ParallelFor(n_layers, 1, [&](int64_t first, int64_t last) {
      for (int64_t l = first; l < last; ++l) ComputeObservation(static_cast<int>(l), &observation_[l]);
    });
  }
  // External scores are for the run's first prompt end only (reconstruction handed over before
  // it; key-norm and expected-attention priors computed here, before the observation buffer
  // they read is freed); any given later are dropped.
  const bool first_prompt_end = trigger == BatchKind::kPromptEnd && !priors_done_;
  if (!first_prompt_end) {
    for (LayerState& l : layers_) l.external = {};
  }
  if (budget_ && first_prompt_end && policy_->wants_external_scores() &&
      config_.score_source != ScoreSource::kReconstruction) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(n_layers, 1, [&](int64_t first, int64_t last) {
      for (int64_t l = first; l < last; ++l) {
        ComputePriors(static_cast<int>(l), &layers_[l].external);
      }
    });
    stats_.prior_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (trigger != BatchKind::kGenerated) ReleaseObservation();

  // Bytes left for the bands once every floor (sinks, recent, positions, next token) is paid.
  int64_t total = RoutingContext::kUnlimited;
  bool short_of_floor = false;
  if (!unlimited) {
    int64_t floors = layers_.front().count * int64_t{4} + reserve + ObservationBytes();
    for (const LayerState& l : layers_) floors += FloorBytes(l);
    total = *budget_ - floors;
    if (total < 0) {
      short_of_floor = true;
      total = 0;
    }
  }
  policy_->LayerBudgetWeights(n_layers, &weights_);
  QEVICT_CHECK(static_cast<int>(weights_.size()) == n_layers);
  double weight_sum = 0.0;
  for (double w : weights_) weight_sum += w;

  for (int l = 0; l < n_layers; ++l) {
    const LayerState& state = layers_[l];
    const size_t band = BandSize(state);
    std::vector<BandWindow>& view = band_views_[l];
    view.resize(state.windows.size());  // the band, then the recent windows
    for (size_t j = 0; j < view.size(); ++j) {
      const WindowRecord& w = state.windows[j];
      view[j] = BandWindow{w.index, pos_[FirstToken(w.index)], w.tier, ScoreOf(w), w.last_mass};
    }
    observation_offsets_[l].resize(observe ? state.windows.size() : 0);
    for (size_t j = 0; j < observation_offsets_[l].size(); ++j) {
      observation_offsets_[l][j] = SinkTokens(state) + static_cast<int64_t>(j) * window_;
    }
    LayerBand& lb = layer_bands_[l];
    lb.windows = std::span<const BandWindow>(view).first(band);
    lb.recent = std::span<const BandWindow>(view).subspan(band);
    lb.observation_heads = geo_.n_kv_heads;
    lb.observation = observe ? std::span<const float>(observation_[l]) : std::span<const float>();
    lb.observation_offsets = observation_offsets_[l];
    lb.external = state.external;
    lb.first_recent_index = band < state.windows.size() ? state.windows[band].index
                            : state.windows.empty()     ? 0
                                                        : state.windows.back().index + 1;
    lb.budget_bytes = unlimited ? RoutingContext::kUnlimited
                                : static_cast<int64_t>(static_cast<double>(total) *
                                                       (weights_[l] / weight_sum));
  }

  RoutingContext context;
  context.config = &config_;
  context.layers = layer_bands_;
  context.fp_window_bytes = fp_cost;
  context.q_window_bytes = q_cost;
  context.trigger = trigger;
  context.first_routing = !routed_;
  context.routing_step = stats_.routing_steps;
  plan_.ResetTo(context);
  policy_->Route(context, &plan_);
  if (trigger != BatchKind::kGenerated) {
    for (LayerState& l : layers_) l.external = {};  // consumed by this prompt's routing step
  }
  if (first_prompt_end) priors_done_ = true;

  // A plan must fit each layer's band budget unless the policy declares it cannot.
  QEVICT_CHECK(plan_.targets.size() == static_cast<size_t>(n_layers));
  for (int l = 0; l < n_layers; ++l) {
    QEVICT_CHECK(plan_.targets[l].size() == layer_bands_[l].windows.size());
    if (unlimited || plan_.infeasible) continue;
    int64_t bytes = 0;
    for (Tier t : plan_.targets[l]) bytes += t == Tier::kFp16 ? fp_cost : t == Tier::kQuant ? q_cost : 0;
    QEVICT_CHECK(bytes <= layer_bands_[l].budget_bytes);
  }

  Apply(plan_, pool);
  stats_.routed_reserved_peak_bytes =
      std::max(stats_.routed_reserved_peak_bytes, ReservedBytes());
  routed_ = true;
  over_budget_ = plan_.infeasible || short_of_floor;
  since_route_ = 0;
  ++stats_.routing_steps;
  if ((plan_.infeasible || short_of_floor) && !stats_.infeasible) {
    stats_.infeasible = true;
    stats_.note = plan_.infeasible
                      ? plan_.note
                      : "budget of " + std::to_string(*budget_) +
                            " bytes cannot hold the sinks and recent windows at token " +
                            std::to_string(layers_.front().count);
  }
  if (!unlimited && !plan_.infeasible && !short_of_floor) {
    QEVICT_CHECK(resident_bytes() + reserve <= *budget_);
  }
}

void TieredCache::Apply(const Plan& plan, ThreadPool& pool) {
  const int n_layers = geo_.n_layers;
  // Evictions first (serial): they only free memory.
  for (int l = 0; l < n_layers; ++l) {
    LayerState& state = layers_[l];
    const std::vector<Tier>& targets = plan.targets[l];
    for (size_t j = 0; j < targets.size(); ++j) {
      WindowRecord& w = state.windows[j];
      QEVICT_CHECK(w.tier != Tier::kEvicted);
      if (targets[j] == w.tier) continue;
      if (targets[j] == Tier::kEvicted) {
        ReleaseWindow(w);
        ++state.evicted;
        ++stats_.evictions;
      } else if (targets[j] == Tier::kQuant) {
        ++stats_.demotions;
      } else {
        ++stats_.promotions;
      }
    }
  }
  // Demotions (each frees more than it takes), then promotions; layers in parallel.
  for (Tier wanted : {Tier::kQuant, Tier::kFp16}) {
    pool.ParallelFor(n_layers, 1, [&](int64_t first, int64_t last) {
      thread_local std::vector<float> scratch;
      thread_local std::vector<uint8_t> bytes;
      for (int64_t l = first; l < last; ++l) {
        const std::vector<Tier>& targets = plan.targets[l];
        for (size_t j = 0; j < targets.size(); ++j) {
          WindowRecord& w = layers_[l].windows[j];
          if (targets[j] != wanted || w.tier == wanted) continue;
          if (wanted == Tier::kQuant) {
            Demote(w, scratch, bytes);
          } else {
            Promote(w, scratch, bytes);
          }
        }
      }
    });
  }
  for (LayerState& state : layers_) {
    std::erase_if(state.windows, [](const WindowRecord& w) { return w.tier == Tier::kEvicted; });
  }
  UpdatePeaks();
  CompactStore();
}

// Survivors of a routing step are scattered over the slabs prefill filled; moving them into the
// fewest slabs returns the rest to the OS (docs/kv-cache.md, "Memory").
void TieredCache::CompactStore() {
  std::vector<uint32_t*> owner[2];  // [tier][handle] where the handle is kept
  for (LayerState& l : layers_) {
    for (WindowRecord& w : l.windows) {
      std::vector<uint32_t*>& o = owner[w.tier == Tier::kFp16 ? 0 : 1];
      if (w.block >= o.size()) o.resize(w.block + 1, nullptr);
      o[w.block] = &w.block;
    }
  }
  stats_.compaction_moves += store_.Compact([&](WindowStore::Kind kind, uint32_t from, uint32_t to) {
    if (kind == WindowStore::Kind::kSink) {
      for (LayerState& l : layers_) {
        if (l.sink_block == from) l.sink_block = to;
      }
      return;
    }
    std::vector<uint32_t*>& o = owner[kind == WindowStore::Kind::kFp16 ? 0 : 1];
    QEVICT_CHECK(from < o.size() && o[from] != nullptr);
    *o[from] = to;
  });
}

// fp16 window -> quantized window (keys un-rotated to before RoPE). Exact recovery first copies
// the fp16 block to the cold store (once: a window keeps its cold copy until evicted).
void TieredCache::Demote(WindowRecord& w, std::vector<float>& scratch,
                         std::vector<uint8_t>& bytes) {
  const int n_kv = geo_.n_kv_heads, hd = geo_.head_dim;
  const int64_t elems = int64_t{n_kv} * window_ * hd;
  const uint8_t* fp = store_.SharedData(WindowStore::Kind::kFp16, w.block);
  uint8_t* cold = nullptr;
  if (store_.cold() != nullptr && w.cold_slot < 0) w.cold_slot = store_.AllocateCold(&cold);
  if (cold != nullptr) std::memcpy(cold, fp, fp_block_bytes_);
  scratch.resize(2 * elems);
  float* keys = scratch.data();  // [n_kv][W][hd]
  float* values = keys + elems;  // [n_kv][W][hd]
  Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(fp), keys, elems);
  Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(fp) + elems, values, elems);
  for (int h = 0; h < n_kv; ++h) {
    for (int t = 0; t < window_; ++t) {
      UnRotate(rope_, keys + (int64_t{h} * window_ + t) * hd, pos_[FirstToken(w.index) + t]);
    }
  }
  bytes.resize(qlayout_.bytes);
  QuantizeWindow(qlayout_, keys, values, bytes.data());
  uint8_t* dst;
  w.block = store_.Replace(WindowStore::Kind::kFp16, w.block, WindowStore::Kind::kQuant, &dst);
  std::memcpy(dst, bytes.data(), qlayout_.bytes);
  w.tier = Tier::kQuant;
}

// Quantized window -> fp16 window: the exact original from the cold store, or (paper fidelity)
// the dequantized codes rotated to their positions.
void TieredCache::Promote(WindowRecord& w, std::vector<float>& scratch,
                          std::vector<uint8_t>& bytes) {
  const int n_kv = geo_.n_kv_heads, hd = geo_.head_dim;
  const int64_t elems = int64_t{n_kv} * window_ * hd;
  bytes.resize(fp_block_bytes_);
  if (w.cold_slot >= 0) {
    std::memcpy(bytes.data(), store_.cold()->data(w.cold_slot), fp_block_bytes_);
  } else {
    const uint8_t* q = store_.SharedData(WindowStore::Kind::kQuant, w.block);
    scratch.resize(elems);
    uint16_t* k16 = reinterpret_cast<uint16_t*>(bytes.data());
    uint16_t* v16 = k16 + elems;
    const int32_t* positions = pos_.data() + FirstToken(w.index);
    for (int h = 0; h < n_kv; ++h) {
      float* rows = scratch.data() + int64_t{h} * window_ * hd;
      DequantizeRotatedKeys(qlayout_, q, h, 0, window_, positions, rope_, rows);
    }
    Fp32ToFp16Row(scratch.data(), k16, elems);
    for (int h = 0; h < n_kv; ++h) {
      DequantizeValueRows(qlayout_, q, h, 0, window_, scratch.data() + int64_t{h} * window_ * hd);
    }
    Fp32ToFp16Row(scratch.data(), v16, elems);
  }
  uint8_t* dst;
  w.block = store_.Replace(WindowStore::Kind::kQuant, w.block, WindowStore::Kind::kFp16, &dst);
  std::memcpy(dst, bytes.data(), fp_block_bytes_);
  w.tier = Tier::kFp16;
}

}  // namespace qevict
