#include "kv/quest_cache.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kv/cache_state.h"
#include "kv/page_mass.h"
#include "util/error.h"

namespace qevict {
namespace {

constexpr uint32_t kQuestTag = 0x51535431;   // "QST1"
constexpr uint32_t kOracleTag = 0x524f4331;  // "ROC1"

}  // namespace

QuestSettings RecallOracleSettings(const KvConfig& config, bool later_prompts) {
  QuestSettings s;
  s.budget = config;
  s.page = config.window;  // what a tiered cache (qevict-recall) keeps, evicts and recalls
  s.dense_layers = 0;
  s.ranking = PageRanking::kExactMass;
  s.windows = true;
  s.later_prompts_select = later_prompts;
  return s;
}

QuestCache::QuestCache(const QuestSettings& settings, const KvGeometry& geometry, const Rope& rope,
                       std::unique_ptr<FullCache> full)
    : settings_(settings), full_(std::move(full)) {
  QEVICT_CHECK(settings_.page >= 1 && settings_.dense_layers >= 0);
  layout_.page = settings_.page;
  layout_.sinks = settings_.budget.sinks;
  layout_.recent = settings_.budget.recent;
  layout_.windows = settings_.windows;
  if (!full_) {
    full_ = std::make_unique<FullCache>(geometry, rope);
  } else {
    const KvGeometry& g = full_->geometry();
    QEVICT_CHECK(g.n_layers == geometry.n_layers && g.n_kv_heads == geometry.n_kv_heads &&
                 g.head_dim == geometry.head_dim && g.n_heads == geometry.n_heads);
  }
  // A fork continues after its prefix's prompt (the evaluator's prompt-end rows).
  first_prompt_ended_ = full_->n_tokens() > 0;
  RebuildBounds();
  SetBudget();
}

std::string_view QuestCache::policy_name() const {
  return settings_.ranking == PageRanking::kExactMass ? "recall-oracle" : "quest";
}

void QuestCache::SetBudget() {
  const std::optional<int64_t> bytes =
      settings_.budget.GlobalBudgetBytes(full_->run_tokens(), geometry());
  budget_tokens_ = bytes ? *bytes / geometry().fp16_bytes_per_token() : -1;
}

void QuestCache::BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  full_->BeginRun(prompt_tokens, max_new_tokens);
  kind_ = BatchKind::kPromptChunk;
  first_prompt_ended_ = false;
  generated_ = attended_bytes_ = visible_bytes_ = fixed_over_budget_ = 0;
  RebuildBounds();
  SetBudget();
}

void QuestCache::ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  full_->ContinueRun(prompt_tokens, max_new_tokens);
  SetBudget();
}

void QuestCache::Store(int layer, int n, const int32_t* pos, const float* k, const float* v) {
  const int64_t first = full_->layer_tokens(layer);
  full_->Store(layer, n, pos, k, v);
  ExtendBounds(layer, first);
}

int64_t QuestCache::n_pages(int layer) const {
  return (full_->layer_tokens(layer) + settings_.page - 1) / settings_.page;
}

// Folds the keys of tokens [first_token, stored) into their pages' bounds. The keys are the
// stored fp16 rows, so min and max are fp16 values: kept exactly in fp16.
void QuestCache::ExtendBounds(int layer, int64_t first_token) {
  if (!keeps_bounds()) return;
  const KvGeometry& geo = geometry();
  const int hd = geo.head_dim, n_kv = geo.n_kv_heads;
  const int64_t page_floats = int64_t{n_kv} * 2 * hd;
  std::vector<uint16_t>& bounds = bounds_[layer];
  std::vector<float> key(hd), lo(hd), hi(hd);
  const int64_t stored = full_->layer_tokens(layer);
  for (int64_t t = first_token; t < stored; ++t) {
    const int64_t page = t / settings_.page;
    const bool opens = static_cast<int64_t>(bounds.size()) <= page * page_floats;
    if (opens) bounds.resize((page + 1) * page_floats);
    for (int h = 0; h < n_kv; ++h) {
      const uint16_t* row = full_->key_rows(layer, h) + t * hd;
      uint16_t* min16 = bounds.data() + page * page_floats + int64_t{h} * 2 * hd;
      uint16_t* max16 = min16 + hd;
      if (opens) {
        std::copy(row, row + hd, min16);
        std::copy(row, row + hd, max16);
        continue;
      }
      Fp16ToFp32Row(row, key.data(), hd);
      Fp16ToFp32Row(min16, lo.data(), hd);
      Fp16ToFp32Row(max16, hi.data(), hd);
      for (int c = 0; c < hd; ++c) {
        if (key[c] < lo[c]) min16[c] = row[c];
        if (key[c] > hi[c]) max16[c] = row[c];
      }
    }
  }
}

// The bounds of a run are reserved for the whole context at once (no reallocation while
// decoding); like FullCache's arrays, their pages are touched only as tokens arrive.
void QuestCache::RebuildBounds() {
  const KvGeometry& geo = geometry();
  const int64_t max_pages = (geo.max_tokens + settings_.page - 1) / settings_.page;
  bounds_.assign(geo.n_layers, {});
  if (!keeps_bounds()) return;
  for (int layer = 0; layer < geo.n_layers; ++layer) {
    bounds_[layer].reserve(max_pages * geo.n_kv_heads * 2 * geo.head_dim);
    ExtendBounds(layer, 0);
  }
}

int64_t QuestCache::BoundsBytesFor(const KvGeometry& geometry, int page, int64_t tokens) {
  const int64_t pages = (std::max<int64_t>(0, tokens) + page - 1) / page;
  return int64_t{geometry.n_layers} * pages * geometry.n_kv_heads * 2 * geometry.head_dim *
         static_cast<int64_t>(sizeof(uint16_t));
}

void QuestCache::PageBounds(int layer, int head, int64_t page, float* kmin, float* kmax) const {
  const int hd = geometry().head_dim;
  QEVICT_CHECK(page >= 0 && page < n_pages(layer));
  const uint16_t* min16 =
      bounds_[layer].data() + (page * geometry().n_kv_heads + head) * 2 * int64_t{hd};
  Fp16ToFp32Row(min16, kmin, hd);
  Fp16ToFp32Row(min16 + hd, kmax, hd);
}

bool QuestCache::Selects(int layer) const {
  const bool selecting_batch =
      kind_ == BatchKind::kGenerated || (settings_.later_prompts_select && first_prompt_ended_);
  return selecting_batch && budget_tokens_ >= 0 && layer >= settings_.dense_layers;
}

std::vector<float> QuestCache::PageKeys(int layer, int head, const float* q_group, int64_t visible,
                                        int64_t first, int64_t end) const {
  const int hd = geometry().head_dim;
  const int group = geometry().n_heads / geometry().n_kv_heads;
  if (settings_.ranking == PageRanking::kExactMass) {
    return ExactPageMass(layout_, q_group, group, full_->key_rows(layer, head), hd, visible, first,
                         end);
  }
  thread_local std::vector<float> kmin, kmax;
  kmin.resize(hd);
  kmax.resize(hd);
  std::vector<float> bounds(end - first);
  for (int64_t p = first; p < end; ++p) {
    PageBounds(layer, head, p, kmin.data(), kmax.data());
    float bound = -INFINITY;
    for (int g = 0; g < group; ++g) {
      bound =
          std::max(bound, PageUpperBound(q_group + int64_t{g} * hd, kmin.data(), kmax.data(), hd));
    }
    bounds[p - first] = bound;
  }
  return bounds;
}

std::vector<TokenRange> QuestCache::AttendedRanges(int layer, int head, const float* q_group,
                                                   int64_t visible) const {
  const std::vector<TokenRange> everything = {{0, visible}};
  if (visible <= 0) return {};
  if (!Selects(layer) || visible <= budget_tokens_) return everything;
  const int64_t first = layout_.FirstCandidate(visible), end = layout_.EndCandidate(visible);
  const int64_t k = layout_.PagesForBudget(budget_tokens_, visible);
  if (k >= end - first) return everything;
  std::vector<int64_t> chosen = TopPages(PageKeys(layer, head, q_group, visible, first, end), k);
  for (int64_t& p : chosen) p += first;
  return layout_.Ranges(visible, chosen);
}

void QuestCache::Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
                        ThreadPool& pool) {
  const KvGeometry& geo = geometry();
  const int64_t stored = full_->layer_tokens(layer);
  const int32_t* positions = full_->positions();
  std::vector<int64_t> visible(n);
  int64_t visible_sum = 0;
  bool sparse = false;
  for (int i = 0; i < n; ++i) {
    visible[i] = std::upper_bound(positions, positions + stored, pos[i]) - positions;
    visible_sum += visible[i];
    sparse = sparse || (Selects(layer) && visible[i] > budget_tokens_);
  }
  const int64_t head_token_bytes = int64_t{2} * geo.head_dim * 2;  // K and V, fp16
  if (kind_ == BatchKind::kGenerated)
    visible_bytes_ += visible_sum * geo.n_kv_heads * head_token_bytes;
  if (!sparse) {
    full_->Attend(layer, n, pos, q, out, pool);
    if (kind_ == BatchKind::kGenerated) {
      attended_bytes_ += visible_sum * geo.n_kv_heads * head_token_bytes;
    }
    return;
  }
  AttendSelected(layer, n, visible.data(), q, out, pool);
}

// Exact attention of each (query, KV head) over its attended ranges: the scores of every range
// side by side in one row per query head, one softmax over them, the values accumulated range
// by range.
void QuestCache::AttendSelected(int layer, int n, const int64_t* visible, const float* q,
                                float* out, ThreadPool& pool) {
  const KvGeometry& geo = geometry();
  const int n_kv = geo.n_kv_heads, hd = geo.head_dim;
  const int group = geo.n_heads / n_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t items = int64_t{n} * n_kv;
  std::vector<int64_t> attended(items, 0);
  pool.ParallelFor(items, 1, [&](int64_t first_item, int64_t last_item) {
    thread_local std::vector<float> scores, acc, sums;
    for (int64_t item = first_item; item < last_item; ++item) {
      const int h = static_cast<int>(item % n_kv);
      const int i = static_cast<int>(item / n_kv);
      const float* qg = q + (int64_t{i} * geo.n_heads + int64_t{h} * group) * hd;
      float* o = out + (int64_t{i} * geo.n_heads + int64_t{h} * group) * hd;
      const std::vector<TokenRange> ranges = AttendedRanges(layer, h, qg, visible[i]);
      const int64_t m = RangeTokens(ranges);
      attended[item] = m;
      std::fill(o, o + int64_t{group} * hd, 0.0f);
      if (m == 0) continue;
      scores.resize(int64_t{group} * m);
      const uint16_t* keys = full_->key_rows(layer, h);
      const uint16_t* values = full_->value_rows(layer, h);
      int64_t offset = 0;
      for (const TokenRange& r : ranges) {
        ScoreFp16Keys(qg, group, keys + r.begin * hd, hd, r.end - r.begin, hd, scale,
                      scores.data() + offset, m);
        offset += r.end - r.begin;
      }
      sums.resize(group);
      for (int g = 0; g < group; ++g) {
        float* row = scores.data() + int64_t{g} * m;
        sums[g] = ExpShiftSum(row, m, MaxOf(row, m));
      }
      acc.assign(int64_t{group} * hd, 0.0f);
      offset = 0;
      for (const TokenRange& r : ranges) {
        AccumulateFp16Values(scores.data() + offset, group, m, values + r.begin * hd, hd,
                             r.end - r.begin, hd, acc.data());
        offset += r.end - r.begin;
      }
      for (int g = 0; g < group; ++g) {
        const float inv = sums[g] > 0.0f ? 1.0f / sums[g] : 0.0f;
        for (int d = 0; d < hd; ++d) o[int64_t{g} * hd + d] = acc[int64_t{g} * hd + d] * inv;
      }
    }
  });
  for (int64_t a : attended) {
    if (kind_ == BatchKind::kGenerated) attended_bytes_ += a * int64_t{2} * hd * 2;
    if (a > budget_tokens_) fixed_over_budget_ = std::max(fixed_over_budget_, a);
  }
}

void QuestCache::EndBatch(BatchKind kind, ThreadPool& pool) {
  if (kind == BatchKind::kGenerated) ++generated_;
  if (kind == BatchKind::kPromptEnd) first_prompt_ended_ = true;
}

int64_t QuestCache::BoundsBytes() const {
  int64_t bytes = 0;
  for (const auto& b : bounds_) bytes += static_cast<int64_t>(b.size() * sizeof(uint16_t));
  return bytes;
}

KvStats QuestCache::Stats() const {
  const KvGeometry& geo = geometry();
  KvStats s = full_->Stats();
  // The bounds only grow within a run: at the peak they covered the peak's tokens.
  const int64_t peak_bounds =
      keeps_bounds()
          ? BoundsBytesFor(geo, settings_.page, s.peak_bytes / geo.fp16_bytes_per_token())
          : 0;
  s.meta_bytes = BoundsBytes();
  s.peak_bytes += peak_bounds;
  s.pool_reserved_bytes += peak_bounds;
  s.reserved_bytes += peak_bounds;
  s.peak_reserved_bytes += peak_bounds;
  if (generated_ > 0) {
    s.mean_attended_bytes = attended_bytes_ / generated_;
    s.mean_visible_bytes = visible_bytes_ / generated_;
  }
  const std::string name(policy_name());
  if (fixed_over_budget_ > 0) {
    s.infeasible = true;
    s.note = name + ": the budget lets a selecting query attend " + std::to_string(budget_tokens_) +
             " tokens per KV head, fewer than the sinks, recent tokens and partial page it always "
             "attends (up to " +
             std::to_string(fixed_over_budget_) +
             "): it attended those; lower --kv-sinks / --kv-recent or raise the budget";
  } else if (budget_tokens_ >= 0 && settings_.ranking == PageRanking::kExactMass) {
    s.note =
        "recall-oracle (a diagnostic, not a policy to use): every token stays resident in "
        "fp16 (the full cache's bytes, no memory saved); " +
        std::string(settings_.later_prompts_select ? "later prompts' tokens and " : "") +
        "generated tokens attend per KV head the sinks, the recent windows and the windows "
        "of largest exact attention mass: " +
        std::to_string(budget_tokens_) + " tokens per KV head in every layer";
  } else if (budget_tokens_ >= 0) {
    s.note =
        "quest: every token stays resident in fp16 (no memory saved); the budget caps the "
        "tokens a generated token attends: " +
        std::to_string(budget_tokens_) + " per KV head in layers " +
        std::to_string(settings_.dense_layers) + " and up (the first " +
        std::to_string(settings_.dense_layers) + " attend every token)";
  }
  return s;
}

void QuestCache::SaveState(ByteWriter& out) const {
  SaveStateTag(keeps_bounds() ? kQuestTag : kOracleTag, out);
  out.Pod<int64_t>(full_->run_tokens());
  out.Pod<int64_t>(generated_);
  out.Pod<int64_t>(attended_bytes_);
  out.Pod<int64_t>(visible_bytes_);
  out.Pod<int64_t>(fixed_over_budget_);
  full_->SaveState(out);
}

void QuestCache::LoadState(ByteReader& in) {
  LoadStateTag(keeps_bounds() ? kQuestTag : kOracleTag,
               keeps_bounds() ? "the quest cache" : "the recall-oracle cache", in);
  const int64_t run_tokens = in.Pod<int64_t>("run tokens");
  const int64_t generated = in.Pod<int64_t>("generated tokens");
  const int64_t attended = in.Pod<int64_t>("attended bytes");
  const int64_t visible = in.Pod<int64_t>("visible bytes");
  const int64_t over = in.Pod<int64_t>("tokens over the budget");
  if (run_tokens < 0 || generated < 0 || attended < 0 || visible < attended || over < 0) {
    in.Fail("quest counters out of range");
  }
  full_->LoadState(in);
  full_->ContinueRun(0, std::max<int64_t>(0, run_tokens - full_->n_tokens()));
  generated_ = generated;
  attended_bytes_ = attended;
  visible_bytes_ = visible;
  fixed_over_budget_ = over;
  kind_ = BatchKind::kPromptChunk;
  first_prompt_ended_ = full_->n_tokens() > 0;  // states are saved after a prompt end or later
  RebuildBounds();
  SetBudget();
}

}  // namespace qevict
