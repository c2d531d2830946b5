// Page selection of Quest (Tang et al., "Quest: Query-Aware Sparsity for Efficient Long-Context
// LLM Inference", ICML 2024), as pure functions over one layer and KV head: the upper bound of a
// page's attention scores from its keys' per-channel min and max, the top pages by that bound,
// and the token ranges a query attends (sinks, the chosen pages, the recent tokens). QuestCache
// (kv/quest_cache.h) runs them; the tests check them against brute force.
#pragma once

#include <cstdint>
#include <vector>

namespace qevict {

// Upper bound of q.k over every key k of a page whose channels lie in [kmin[c], kmax[c]]:
// sum_c max(q[c] * kmin[c], q[c] * kmax[c]) (Quest, Algorithm 1).
float PageUpperBound(const float* q, const float* kmin, const float* kmax, int head_dim);

// The k pages of largest bound among n_pages (ties: the lower page index first), in increasing
// page order; all of them when k >= n_pages, none when k <= 0.
std::vector<int64_t> TopPages(const std::vector<float>& bounds, int64_t k);

// Half-open range of storage indices.
struct TokenRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const TokenRange&) const = default;
};

// Where the tokens of a layer lie for a query that sees `visible` stored tokens: the first
// `sinks` tokens, the recent region (the last `recent` tokens and the partial page the next
// token goes to), and between them the candidate pages: page p covers storage indices
// [PageBegin(p), PageBegin(p) + page) clipped to [sinks, recent_begin).
// Quest's pages start at token 0 and its recent region at the last `recent` tokens. With
// `windows` the pages are the tiered cache's windows (kv/window_table.h: window i starts at
// sinks + i * page) and the recent region is the whole windows holding the last `recent`
// tokens, as a tiered cache keeps them (recall-oracle).
struct QuestLayout {
  int page = 16;
  int64_t sinks = 0;
  int64_t recent = 0;
  bool windows = false;

  int64_t PageBegin(int64_t p) const { return (windows ? sinks : 0) + p * page; }
  int64_t SinkEnd(int64_t visible) const;
  int64_t RecentBegin(int64_t visible) const;
  // Candidate pages are [FirstCandidate, EndCandidate) (empty when none).
  int64_t FirstCandidate(int64_t visible) const;
  int64_t EndCandidate(int64_t visible) const;
  // Pages a budget of budget_tokens attended tokens leaves once sinks and recent are counted
  // (a clipped page counts as a whole one, so the attended tokens never exceed the budget
  // unless sinks and recent alone do).
  int64_t PagesForBudget(int64_t budget_tokens, int64_t visible) const;
  // The attended ranges, sorted and merged: sinks, the chosen candidate pages (clipped), recent.
  std::vector<TokenRange> Ranges(int64_t visible, const std::vector<int64_t>& chosen) const;
};

int64_t RangeTokens(const std::vector<TokenRange>& ranges);

}  // namespace qevict
