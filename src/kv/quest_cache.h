// The `quest` policy: query-aware sparse attention after Quest (Tang et al., ICML 2024), the
// accuracy anchor of the comparison at equal attended bytes (docs/kv-cache.md, "Quest"). Every
// token stays in RAM in fp16 (a FullCache: it saves no memory). Tokens are grouped in pages of
// `page` storage indices; per page and KV head the cache keeps the per-channel min and max of
// the keys after RoPE (fp16, exact: the keys are fp16). When a generated token attends a layer
// at or beyond the first `dense_layers`, each KV head ranks the candidate pages by the upper
// bound of q.k (the max over its group's query heads) and attends exactly over the sinks, the
// top pages the budget allows and the recent tokens (kv/quest_pages.h). Prompt tokens, the
// first layers and a run without a budget attend every token, bit-identical to FullCache.
//
// The same cache, with PageRanking::kExactMass, is the `recall-oracle` diagnostic
// (docs/kv-cache.md, "Recall oracle"): pages are the tiered cache's windows, every layer
// selects, a KV head ranks them by the exact softmax mass its query heads give them (a full
// fp16 shadow, nothing charged), and the queries of later prompts (a question after the
// context, a further turn) select too. It bounds what a perfect recall could reach at the
// budget's attended bytes; it saves no memory and is not a policy to use.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "kv/full_cache.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "kv/quest_pages.h"

namespace qevict {

// How a selecting KV head ranks its candidate pages.
enum class PageRanking {
  kKeyBound,   // quest: the upper bound of q.k from the page's key min/max, max over the group
  kExactMass,  // recall-oracle: the exact softmax mass, summed over the group (kv/page_mass.h)
};

struct QuestSettings {
  KvConfig budget;       // the run's budget (KvConfig::GlobalBudgetBytes), sinks, recent
  int page = 16;         // tokens per page (Quest's default)
  int dense_layers = 2;  // first layers of this cache attending every token (Quest: 2)
  PageRanking ranking = PageRanking::kKeyBound;
  // Pages are the tiered cache's windows (QuestLayout::windows): start after the sinks, whole
  // recent windows.
  bool windows = false;
  // The queries of prompts after the run's first prompt end select too (not only generated
  // tokens); the first prompt attends everything.
  bool later_prompts_select = false;
};

// The recall-oracle's settings for a run's config: its windows as pages, every layer selecting,
// exact mass, later prompts selecting unless later_prompts is false.
QuestSettings RecallOracleSettings(const KvConfig& config, bool later_prompts);

class QuestCache : public KvCache {
 public:
  // full: the tokens to start from (a fork of a prefix: TieredCache::ForkFull), or nullptr for
  // an empty cache. rope must outlive the cache.
  QuestCache(const QuestSettings& settings, const KvGeometry& geometry, const Rope& rope,
             std::unique_ptr<FullCache> full = nullptr);

  void BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) override;
  void ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) override;
  void Store(int layer, int n, const int32_t* pos, const float* k, const float* v) override;
  void Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
              ThreadPool& pool) override;
  void BeginBatch(BatchKind kind) override { kind_ = kind; }
  void EndBatch(BatchKind kind, ThreadPool& pool) override;
  KvStats Stats() const override;
  void SaveState(ByteWriter& out) const override;
  void LoadState(ByteReader& in) override;
  const KvGeometry& geometry() const override { return full_->geometry(); }
  int64_t n_tokens() const override { return full_->n_tokens(); }
  void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                  std::vector<int32_t>* positions) const override {
    full_->DenseLayer(layer, keys, values, positions);
  }

  // "quest" or "recall-oracle" (its ranking), for reports.
  std::string_view policy_name() const;
  // Tokens a selecting layer attends per query and KV head at most (-1: every token).
  int64_t budget_tokens() const { return budget_tokens_; }
  // The ranges of storage indices KV head `head` of `layer` attends for the queries q_group
  // (the group's query heads, [group][head_dim], RoPE applied) when they see `visible` tokens
  // and the layer selects; every visible token otherwise.
  std::vector<TokenRange> AttendedRanges(int layer, int head, const float* q_group,
                                         int64_t visible) const;
  // Per-channel min and max of the keys of one page: [head_dim] fp32 each.
  void PageBounds(int layer, int head, int64_t page, float* kmin, float* kmax) const;
  int64_t n_pages(int layer) const;
  bool Selects(int layer) const;
  // Bytes the page bounds of `tokens` tokens take (every layer and KV head): what the cache
  // holds beyond FullCache's, for admission control (server/kv_reservation.cc).
  static int64_t BoundsBytesFor(const KvGeometry& geometry, int page, int64_t tokens);

 private:
  void ExtendBounds(int layer, int64_t first_token);
  void RebuildBounds();
  void SetBudget();
  int64_t BoundsBytes() const;
  void AttendSelected(int layer, int n, const int64_t* visible, const float* q, float* out,
                      ThreadPool& pool);
  // Each candidate page's rank key for KV head `head` (the larger, the sooner chosen).
  std::vector<float> PageKeys(int layer, int head, const float* q_group, int64_t visible,
                              int64_t first, int64_t end) const;
  bool keeps_bounds() const { return settings_.ranking == PageRanking::kKeyBound; }

  QuestSettings settings_;
  QuestLayout layout_;
  std::unique_ptr<FullCache> full_;
  // Per layer [page][kv head][min, max][head_dim] fp16 (kKeyBound only).
  std::vector<std::vector<uint16_t>> bounds_;
  int64_t budget_tokens_ = -1;
  BatchKind kind_ = BatchKind::kPromptChunk;
  bool first_prompt_ended_ = false;  // the run's first prompt end has gone through the layers
  // Generated tokens and the K/V bytes their attention read / would have read over all layers.
  int64_t generated_ = 0;
  int64_t attended_bytes_ = 0;
  int64_t visible_bytes_ = 0;
  // A selecting step attended more tokens than the budget: its sinks and recent tokens alone
  // exceed it (reported as infeasible, like a tiered cache below its floor).
  int64_t fixed_over_budget_ = 0;  // the most tokens such a step attended (0: none)
};

}  // namespace qevict
