// Routing steps of the tiered cache: describe each layer's band and budget to the policy, check
// its plan, and apply it (evict, demote, promote), returning memory before taking any so the
// resident bytes move monotonically from before to after.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/attention.h"
#include "kv/quant_attention.h"
#include "kv/tiered_cache.h"
#include "kv/window_digest.h"
#include "kv/window_priors.h"
#include "util/error.h"

namespace qevict {

void TieredCache::Route(BatchKind trigger, ThreadPool& pool) {
  const auto started = std::chrono::steady_clock::now();
  const int n_layers = geo_.n_layers;
  const std::optional<int64_t> budget = ledger_.budget();
  const bool unlimited = !budget;
  const int64_t fp_cost = ledger_.fp_window_cost();
  const int64_t q_cost = ledger_.q_window_cost();
  const int64_t reserve = ledger_.NextTokenGrowth();

  // The score sources prepare this step: the observation of the latest prompt queries (the
  // prompt's end, or a bounded prefill's chunk end), and the window scores of the run's first
  // prompt end (handed over, or computed from the keys and the observed queries). The
  // observation buffer they read is freed before the budget is shared out, so it never takes
  // budget from the windows; the next prompt batch allocates it again.
  ScoreStep step;
  step.trigger = trigger;
  step.first_prompt_end = trigger == BatchKind::kPromptEnd && !clock_.first_prompt_end_done;
  step.limited = !unlimited;
  BandScoreSource* const sources[] = {&mass_, &query_, external_.get(), &recall_};
  for (BandScoreSource* source : sources) {
    ledger_.counters().prior_seconds += source->Prepare(step, *this, pool);
  }
  ledger_.counters().cold_score_read_bytes += recall_.last_read_bytes();
  if (trigger != BatchKind::kGenerated) observation_.Release();

  // Bytes left for the bands once every floor (sinks, recent, positions, next token) is paid.
  int64_t total = RoutingContext::kUnlimited;
  bool short_of_floor = false;
  if (!unlimited) {
    total = *budget - ledger_.FloorsOfAllLayers();
    if (total < 0) {
      short_of_floor = true;
      total = 0;
    }
  }
  policy_->LayerBudgetWeights(n_layers, &weights_);
  QEVICT_CHECK(static_cast<int>(weights_.size()) == n_layers);
  double weight_sum = 0.0;
  for (double w : weights_) weight_sum += w;

  band_views_.resize(n_layers);
  layer_bands_.resize(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    const LayerWindows& state = table_.layer(l);
    const size_t band = table_.BandSize(state);
    std::vector<BandWindow>& view = band_views_[l];
    view.resize(state.windows.size());  // the band, then the recent windows
    for (size_t j = 0; j < view.size(); ++j) {
      const WindowRecord& w = state.windows[j];
      view[j] = BandWindow{w.index, table_.position(table_.FirstToken(w.index)), w.tier};
    }
    LayerBand& lb = layer_bands_[l];
    lb = LayerBand{};
    for (const BandScoreSource* source : sources) source->Describe(l, *this, view, lb);
    lb.windows = std::span<const BandWindow>(view).first(band);
    lb.recent = std::span<const BandWindow>(view).subspan(band);
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
  context.cold_window_bytes = ledger_.cold_window_cost();
  context.trigger = trigger;
  context.first_routing = !clock_.routed;
  context.routing_step = ledger_.counters().routing_steps;
  plan_.ResetTo(context);
  policy_->Route(context, &plan_);
  for (BandScoreSource* source : sources) source->Consumed(step);
  if (step.first_prompt_end) clock_.first_prompt_end_done = true;

  // A plan must fit each layer's band budget unless the policy declares it cannot.
  QEVICT_CHECK(plan_.targets.size() == static_cast<size_t>(n_layers));
  for (int l = 0; l < n_layers; ++l) {
    QEVICT_CHECK(plan_.targets[l].size() == layer_bands_[l].windows.size());
    QEVICT_CHECK(plan_.recall[l].empty() || cold_tier());
    for (int k : plan_.recall[l]) {
      QEVICT_CHECK(k >= 0 && static_cast<size_t>(k) < layer_bands_[l].cold.size());
    }
    if (unlimited || plan_.infeasible) continue;
    int64_t bytes = static_cast<int64_t>(plan_.recall[l].size()) * fp_cost;
    for (Tier t : plan_.targets[l]) bytes += t == Tier::kFp16 ? fp_cost : t == Tier::kQuant ? q_cost : 0;
    QEVICT_CHECK(bytes <= layer_bands_[l].budget_bytes);
  }

  Apply(plan_, pool);
  ledger_.AfterRoutingStep();
  KvStats& counters = ledger_.counters();
  clock_.routed = true;
  clock_.over_budget = plan_.infeasible || short_of_floor;
  clock_.since_route = 0;
  ++counters.routing_steps;
  if ((plan_.infeasible || short_of_floor) && !counters.infeasible) {
    counters.infeasible = true;
    counters.note = plan_.infeasible
                        ? plan_.note
                        : "budget of " + std::to_string(*budget) +
                              " bytes cannot hold the sinks and recent windows at token " +
                              std::to_string(table_.stored_tokens());
  }
  if (!unlimited && !plan_.infeasible && !short_of_floor) {
    QEVICT_CHECK(ledger_.ResidentBytes() + reserve <= *budget);
  }
  counters.routing_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

void TieredCache::Apply(const Plan& plan, ThreadPool& pool) {
  const int n_layers = geo_.n_layers;
  // The cold windows to recall, by index: this step's evictions add cold windows before them.
  recall_indices_.resize(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    recall_indices_[l].clear();
    for (int k : plan.recall[l]) {
      recall_indices_[l].push_back(static_cast<int32_t>(layer_bands_[l].cold[k].index));
    }
  }
  // Evictions first: they only free memory (to the cold tier, layers in parallel: each writes
  // its windows' blocks to the disk store; without one, serial and dropped).
  if (cold_tier()) {
    pool.ParallelFor(n_layers, 1, [&](int64_t first, int64_t last) {
      thread_local std::vector<uint8_t> bytes;
      for (int64_t l = first; l < last; ++l) {
        LayerWindows& state = table_.layer(static_cast<int>(l));
        const std::vector<Tier>& targets = plan.targets[l];
        for (size_t j = 0; j < targets.size(); ++j) {
          if (targets[j] == Tier::kEvicted) ToCold(state, state.windows[j], bytes);
        }
      }
    });
  }
  for (int l = 0; l < n_layers; ++l) {
    LayerWindows& state = table_.layer(l);
    const std::vector<Tier>& targets = plan.targets[l];
    for (size_t j = 0; j < targets.size(); ++j) {
      WindowRecord& w = state.windows[j];
      if (targets[j] == Tier::kEvicted && cold_tier()) {
        QEVICT_CHECK(w.tier == Tier::kEvicted);  // gone cold above
        ++ledger_.counters().evictions;
        continue;
      }
      QEVICT_CHECK(w.tier != Tier::kEvicted);
      if (targets[j] == w.tier) continue;
      if (targets[j] == Tier::kEvicted) {
        ReleaseWindow(w);
        ++state.evicted;
        ++ledger_.counters().evictions;
      } else if (targets[j] == Tier::kQuant) {
        ++ledger_.counters().demotions;
      } else {
        ++ledger_.counters().promotions;
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
          WindowRecord& w = table_.layer(static_cast<int>(l)).windows[j];
          if (targets[j] != wanted || w.tier == wanted) continue;
          if (wanted == Tier::kQuant) {
            Demote(static_cast<int>(l), w, scratch, bytes);
          } else {
            Promote(static_cast<int>(l), w, scratch, bytes);
          }
        }
      }
    });
  }
  table_.EraseEvicted();
  // Recalls last: they take memory the steps above gave back.
  if (cold_tier()) {
    pool.ParallelFor(n_layers, 1, [&](int64_t first, int64_t last) {
      thread_local std::vector<uint8_t> bytes;
      for (int64_t l = first; l < last; ++l) {
        RecallLayer(table_.layer(static_cast<int>(l)), recall_indices_[l], bytes);
      }
    });
    for (const auto& r : recall_indices_) ledger_.counters().recalls += static_cast<int64_t>(r.size());
  }
  ledger_.UpdatePeaks();
  CompactStore();
}

// A band window to the cold tier: its exact fp16 block to the disk store (once: a window that
// was demoted already has its copy there), its digest from the exact keys, its RAM freed.
void TieredCache::ToCold(LayerWindows& l, WindowRecord& w, std::vector<uint8_t>& bytes) {
  const int64_t fp_block_bytes = ledger_.fp_block_bytes();
  const uint8_t* fp;
  if (w.tier == Tier::kFp16) {
    fp = store_.SharedData(WindowStore::Kind::kFp16, w.block);
    if (w.cold_slot < 0) w.cold_slot = store_.WriteDisk(fp, ColdBlockTag(LayerOf(l), w.index));
  } else {
    QEVICT_CHECK(w.cold_slot >= 0);  // written when it was demoted
    bytes.resize(fp_block_bytes);
    store_.ReadDisk(w.cold_slot, ColdBlockTag(LayerOf(l), w.index), bytes.data());
    fp = bytes.data();
  }
  const DigestGeometry dg{geo_.n_kv_heads, geo_.head_dim, config_.window};
  if (DigestNeedsContext(config_.cold_digest) && !l.has_digest_context) FitDigestContext(l, w, fp);
  thread_local std::vector<uint8_t> digest;
  const uint8_t* own_digest = nullptr;
  if (table_.digest_group() > 1) {
    EnsureGroupDigest(l, w.index, fp);
  } else {
    digest.resize(table_.digest_bytes());
    WindowDigest::BuildIntoFromFp16(config_.cold_digest, dg, reinterpret_cast<const uint16_t*>(fp),
                                    digest.data(),
                                    l.has_digest_context ? &l.digest_context : nullptr);
    own_digest = digest.data();
  }
  store_.Free(WindowStore::KindOf(w.tier), w.block);
  table_.AddCold(l, ColdRecord{w.index, w.cold_slot}, own_digest);
  w.cold_slot = -1;
  w.block = BlockPool::kNoBlock;
  w.tier = Tier::kEvicted;  // its record goes (EraseEvicted); the window lives on in l.cold
}

// With digest groups, a group's digest is built when its first window goes cold, from all of its
// closed windows: while the recent region spans the group (G W <= R), they are all still fp16
// then; a window of the group the digest did not cover (closed later, or the group wider than
// the recent region) has it rebuilt when it goes cold, the others' blocks read back from disk.
void TieredCache::EnsureGroupDigest(LayerWindows& l, int64_t index, const uint8_t* own) {
  const int G = table_.digest_group();
  if (table_.GroupCovers(l, index)) return;
  const int64_t group = index / G;
  const int64_t closed = l.count > config_.sinks ? (l.count - config_.sinks) / config_.window : 0;
  const int64_t fp_block_bytes = ledger_.fp_block_bytes();
  thread_local std::vector<uint8_t> read;
  thread_local std::vector<const uint16_t*> keys;
  thread_local std::vector<std::pair<int64_t, int32_t>> from_disk;  // (member, slot)
  const int layer = LayerOf(l);
  keys.clear();
  from_disk.clear();
  uint64_t covered = 0;
  std::vector<const uint8_t*> member(static_cast<size_t>(G), nullptr);
  for (int64_t i = group * G; i < std::min<int64_t>((group + 1) * G, closed); ++i) {
    const int64_t m = i - group * G;
    if (i == index && own != nullptr) {
      member[m] = own;
      continue;
    }
    const auto cold = std::lower_bound(l.cold.begin(), l.cold.end(), i,
                                       [](const ColdRecord& c, int64_t x) { return c.index < x; });
    if (cold != l.cold.end() && cold->index == i) {
      from_disk.emplace_back(m, cold->slot);
      continue;
    }
    const auto res = std::lower_bound(l.windows.begin(), l.windows.end(), i,
                                      [](const WindowRecord& w, int64_t x) { return w.index < x; });
    if (res == l.windows.end() || res->index != i) continue;  // dropped (not in a cold tier)
    if (res->tier == Tier::kFp16) {
      member[m] = store_.SharedData(WindowStore::Kind::kFp16, res->block);
    } else if (res->cold_slot >= 0) {  // quantized: its exact copy is on disk
      from_disk.emplace_back(m, res->cold_slot);
    }
  }
  read.resize(static_cast<size_t>(fp_block_bytes) * from_disk.size());
  for (size_t d = 0; d < from_disk.size(); ++d) {
    store_.ReadDisk(from_disk[d].second, ColdBlockTag(layer, group * G + from_disk[d].first),
                    read.data() + static_cast<int64_t>(d) * fp_block_bytes);
    member[from_disk[d].first] = read.data() + static_cast<int64_t>(d) * fp_block_bytes;
  }
  for (int m = 0; m < G; ++m) {
    if (member[m] == nullptr) continue;
    keys.push_back(reinterpret_cast<const uint16_t*>(member[m]));  // keys: the block's first half
    covered |= uint64_t{1} << m;
  }
  QEVICT_CHECK(((covered >> (index - group * G)) & 1) != 0);
  WindowDigest::BuildIntoFromFp16Windows(
      config_.cold_digest, DigestGeometry{geo_.n_kv_heads, geo_.head_dim, config_.window}, keys,
      table_.GroupDigestForWrite(l, group, covered),
      l.has_digest_context ? &l.digest_context : nullptr);
}

// A layer's digest context (per-channel offsets and scales of its mean keys), fitted once, at
// its first window that goes cold, from that window and the layer's fp16 band windows.
void TieredCache::FitDigestContext(LayerWindows& l, const WindowRecord& first, const uint8_t* fp) {
  const int64_t elems = int64_t{geo_.n_kv_heads} * config_.window * geo_.head_dim;
  std::vector<float> keys;
  auto add = [&](const uint8_t* block) {
    const size_t at = keys.size();
    keys.resize(at + static_cast<size_t>(elems));
    Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(block), keys.data() + at, elems);
  };
  add(fp);
  const size_t band = table_.BandSize(l);
  for (size_t j = 0; j < band; ++j) {
    const WindowRecord& w = l.windows[j];
    if (&w == &first || w.tier != Tier::kFp16) continue;
    add(store_.SharedData(WindowStore::Kind::kFp16, w.block));
  }
  const DigestGeometry dg{geo_.n_kv_heads, geo_.head_dim, config_.window};
  l.digest_context = DigestContext::Fit(dg, keys.data(), static_cast<int>(keys.size() / elems),
                                        DigestContextRank(config_.cold_digest, dg));
  l.has_digest_context = true;
}

// KvConfig::recall_prompt: the cold windows a prompt batch's last queries attend most (the
// best recall_focus candidates by exact score, with their pooled neighbours' scores), back
// into fp16 before the batch attends. They are held on top of the budget until the prompt's
// end routes the layer again, as a prompt chunk is.
void TieredCache::RecallForPrompt(int layer, int n, const int32_t* pos, const float* q,
                                  ThreadPool& pool) {
  const auto started = std::chrono::steady_clock::now();
  LayerWindows& l = table_.layer(layer);
  // The scan reads every cold window of each layer in turn: the next layer's are asked of the
  // kernel now, so the disk reads them while this layer scans and attends (KvConfig::
  // cold_prefetch). Already in the page cache, they cost a system call.
  if (config_.cold_prefetch && config_.recall_scan && layer + 1 < table_.n_layers()) {
    if (prefetch_.valid()) prefetch_.wait();
    prefetch_slots_.clear();
    for (const ColdRecord& c : table_.layer(layer + 1).cold) prefetch_slots_.push_back(c.slot);
    const DiskColdStore* disk = store_.disk();
    prefetch_ = std::async(std::launch::async, [this, disk] { disk->Prefetch(prefetch_slots_); });
  }
  recall_.ScoreBatch(layer, *this, n, pos, q, pool);
  ledger_.counters().cold_score_read_bytes += recall_.read_bytes(layer);
  std::vector<std::pair<float, int32_t>> best;
  for (const ColdWindow& c : recall_.cold(layer)) {
    if (c.candidate && c.score > 0.0f) best.emplace_back(c.score, static_cast<int32_t>(c.index));
  }
  const size_t keep = std::min<size_t>(best.size(), static_cast<size_t>(config_.recall_prompt));
  std::partial_sort(best.begin(), best.begin() + keep, best.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int32_t> indices;
  for (size_t k = 0; k < keep; ++k) indices.push_back(best[k].second);
  std::sort(indices.begin(), indices.end());
  thread_local std::vector<uint8_t> bytes;
  RecallLayer(l, indices, bytes);
  ledger_.counters().recalls += static_cast<int64_t>(indices.size());
  ledger_.UpdatePeaks();
  ledger_.counters().routing_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

// Cold windows (by index) back into fp16, read in one batch; each keeps its disk copy, so a
// later demotion or return to the cold tier writes nothing.
void TieredCache::RecallLayer(LayerWindows& l, std::span<const int32_t> indices,
                              std::vector<uint8_t>& bytes) {
  if (indices.empty()) return;
  const int64_t fp_block_bytes = ledger_.fp_block_bytes();
  auto find = [&](int32_t index) {
    const auto it = std::lower_bound(l.cold.begin(), l.cold.end(), index,
                                     [](const ColdRecord& c, int32_t i) { return c.index < i; });
    QEVICT_CHECK(it != l.cold.end() && it->index == index);
    return it;
  };
  thread_local std::vector<int32_t> slots;
  thread_local std::vector<uint64_t> tags;
  slots.clear();
  tags.clear();
  const int layer = LayerOf(l);
  for (int32_t index : indices) {
    slots.push_back(find(index)->slot);
    tags.push_back(ColdBlockTag(layer, index));
  }
  bytes.resize(static_cast<size_t>(fp_block_bytes) * slots.size());
  store_.disk()->ReadBlocks(slots, tags, bytes.data());
  // (Taking a record shifts the ones after it: each is found again by its index.)
  for (size_t i = 0; i < indices.size(); ++i) {
    const ColdRecord record =
        table_.TakeCold(l, static_cast<size_t>(find(indices[i]) - l.cold.begin()));
    uint8_t* dst;
    const uint32_t block = store_.Allocate(WindowStore::Kind::kFp16, &dst);
    std::memcpy(dst, bytes.data() + static_cast<int64_t>(i) * fp_block_bytes, fp_block_bytes);
    table_.InsertResident(
        l, WindowRecord{block, record.slot, record.index, Tier::kFp16, 0.0f, 0.0f, 0.0f});
  }
}

// Survivors of a routing step are scattered over the slabs prefill filled; moving them into the
// fewest slabs returns the rest to the OS (docs/kv-cache.md, "Memory").
void TieredCache::CompactStore() {
  std::vector<uint32_t*> owner[2];  // [tier][handle] where the handle is kept
  for (LayerWindows& l : table_.layers()) {
    for (WindowRecord& w : l.windows) {
      std::vector<uint32_t*>& o = owner[w.tier == Tier::kFp16 ? 0 : 1];
      if (w.block >= o.size()) o.resize(w.block + 1, nullptr);
      o[w.block] = &w.block;
    }
  }
  ledger_.counters().compaction_moves += store_.Compact([&](WindowStore::Kind kind, uint32_t from, uint32_t to) {
    if (kind == WindowStore::Kind::kSink) {
      for (LayerWindows& l : table_.layers()) {
        if (l.sink_block == from) l.sink_block = to;
      }
      return;
    }
    std::vector<uint32_t*>& o = owner[kind == WindowStore::Kind::kFp16 ? 0 : 1];
    QEVICT_CHECK(from < o.size() && o[from] != nullptr);
    *o[from] = to;
  });
}

// fp16 window -> quantized window (keys un-rotated to before RoPE). With a disk store (a cold
// tier, exact recovery) the fp16 block is first written to it (once: a window keeps its copy
// until it is evicted, or goes cold).
void TieredCache::Demote(int layer, WindowRecord& w, std::vector<float>& scratch,
                         std::vector<uint8_t>& bytes) {
  const int n_kv = geo_.n_kv_heads, hd = geo_.head_dim;
  const int window = config_.window;
  const int64_t elems = int64_t{n_kv} * window * hd;
  const uint8_t* fp = store_.SharedData(WindowStore::Kind::kFp16, w.block);
  if (store_.disk() != nullptr && w.cold_slot < 0) {
    w.cold_slot = store_.WriteDisk(fp, ColdBlockTag(layer, w.index));
  }
  scratch.resize(2 * elems);
  float* keys = scratch.data();  // [n_kv][W][hd]
  float* values = keys + elems;  // [n_kv][W][hd]
  Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(fp), keys, elems);
  Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(fp) + elems, values, elems);
  for (int h = 0; h < n_kv; ++h) {
    for (int t = 0; t < window; ++t) {
      UnRotate(rope_, keys + (int64_t{h} * window + t) * hd,
               table_.position(table_.FirstToken(w.index) + t));
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
void TieredCache::Promote(int layer, WindowRecord& w, std::vector<float>& scratch,
                          std::vector<uint8_t>& bytes) {
  const int n_kv = geo_.n_kv_heads, hd = geo_.head_dim;
  const int window = config_.window;
  const int64_t elems = int64_t{n_kv} * window * hd;
  const int64_t fp_block_bytes = ledger_.fp_block_bytes();
  bytes.resize(fp_block_bytes);
  if (w.cold_slot >= 0) {  // (ReadDisk: other layers may be writing the store meanwhile)
    store_.ReadDisk(w.cold_slot, ColdBlockTag(layer, w.index), bytes.data());
  } else {
    const uint8_t* q = store_.SharedData(WindowStore::Kind::kQuant, w.block);
    scratch.resize(elems);
    uint16_t* k16 = reinterpret_cast<uint16_t*>(bytes.data());
    uint16_t* v16 = k16 + elems;
    const int32_t* positions = table_.positions() + table_.FirstToken(w.index);
    for (int h = 0; h < n_kv; ++h) {
      float* rows = scratch.data() + int64_t{h} * window * hd;
      DequantizeRotatedKeys(qlayout_, q, h, 0, window, positions, rope_, rows);
    }
    Fp32ToFp16Row(scratch.data(), k16, elems);
    for (int h = 0; h < n_kv; ++h) {
      DequantizeValueRows(qlayout_, q, h, 0, window, scratch.data() + int64_t{h} * window * hd);
    }
    Fp32ToFp16Row(scratch.data(), v16, elems);
  }
  uint8_t* dst;
  w.block = store_.Replace(WindowStore::Kind::kQuant, w.block, WindowStore::Kind::kFp16, &dst);
  std::memcpy(dst, bytes.data(), fp_block_bytes);
  w.tier = Tier::kFp16;
}

}  // namespace qevict
