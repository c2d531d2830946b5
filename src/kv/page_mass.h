// The exact attention mass of pages, the ranking of the `recall-oracle` diagnostic
// (kv/quest_cache.h, PageRanking::kExactMass): what an ideal recall would know about which
// windows a query needs, computed from every stored key (nothing charged for it).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/quest_pages.h"

namespace qevict {

// The softmax attention mass each candidate page [first, end) of `layout` receives from the
// query heads of one KV head that sees `visible` stored tokens. q_group: the group's `group`
// query heads, [group][head_dim] fp32 with RoPE applied; keys: the KV head's stored keys, fp16
// rows of head_dim. Per query head the softmax runs over every visible token (scores scaled by
// 1/sqrt(head_dim), as attention does); a page's mass is the sum over its candidate tokens
// (clipped to the sinks and the recent region, which are attended anyway) and over the group's
// query heads, so it lies in [0, group].
std::vector<float> ExactPageMass(const QuestLayout& layout, const float* q_group, int group,
                                 const uint16_t* keys, int head_dim, int64_t visible, int64_t first,
                                 int64_t end);

}  // namespace qevict
