#include "kv/quest_pages.h"

#include <algorithm>
#include <numeric>

namespace qevict {

float PageUpperBound(const float* q, const float* kmin, const float* kmax, int head_dim) {
  float bound = 0.0f;
  for (int c = 0; c < head_dim; ++c) bound += std::max(q[c] * kmin[c], q[c] * kmax[c]);
  return bound;
}

std::vector<int64_t> TopPages(const std::vector<float>& bounds, int64_t k) {
  const int64_t n = static_cast<int64_t>(bounds.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  k = std::clamp<int64_t>(k, 0, n);
  auto before = [&](int64_t a, int64_t b) {
    return bounds[a] != bounds[b] ? bounds[a] > bounds[b] : a < b;
  };
  std::nth_element(order.begin(), order.begin() + k, order.end(), before);
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

int64_t QuestLayout::SinkEnd(int64_t visible) const { return std::min(sinks, visible); }

int64_t QuestLayout::RecentBegin(int64_t visible) const {
  if (windows) {  // the window holding token visible - recent and every later one
    const int64_t first = visible - recent;
    if (first <= sinks) return SinkEnd(visible);
    return sinks + (first - sinks) / page * page;
  }
  const int64_t partial_page = visible / page * page;  // == visible when the last page is full
  return std::max(SinkEnd(visible), std::min(visible - recent, partial_page));
}

int64_t QuestLayout::FirstCandidate(int64_t visible) const {
  return windows ? 0 : SinkEnd(visible) / page;
}

int64_t QuestLayout::EndCandidate(int64_t visible) const {
  const int64_t from = RecentBegin(visible) - PageBegin(0);
  const int64_t end = from <= 0 ? 0 : (from + page - 1) / page;
  return std::max(end, FirstCandidate(visible));
}

int64_t QuestLayout::PagesForBudget(int64_t budget_tokens, int64_t visible) const {
  const int64_t fixed = SinkEnd(visible) + (visible - RecentBegin(visible));
  return std::max<int64_t>(0, (budget_tokens - fixed) / page);
}

std::vector<TokenRange> QuestLayout::Ranges(int64_t visible,
                                            const std::vector<int64_t>& chosen) const {
  std::vector<TokenRange> ranges;
  auto add = [&](int64_t begin, int64_t end) {
    if (begin >= end) return;
    if (!ranges.empty() && ranges.back().end >= begin) {
      ranges.back().end = std::max(ranges.back().end, end);
    } else {
      ranges.push_back({begin, end});
    }
  };
  const int64_t sink_end = SinkEnd(visible), recent_begin = RecentBegin(visible);
  add(0, sink_end);
  for (int64_t p : chosen) {  // increasing
    add(std::max(PageBegin(p), sink_end), std::min(PageBegin(p + 1), recent_begin));
  }
  add(recent_begin, visible);
  return ranges;
}

int64_t RangeTokens(const std::vector<TokenRange>& ranges) {
  int64_t n = 0;
  for (const TokenRange& r : ranges) n += r.end - r.begin;
  return n;
}

}  // namespace qevict
