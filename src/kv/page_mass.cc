#include "kv/page_mass.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"

namespace qevict {

std::vector<float> ExactPageMass(const QuestLayout& layout, const float* q_group, int group,
                                 const uint16_t* keys, int head_dim, int64_t visible, int64_t first,
                                 int64_t end) {
  std::vector<double> mass(std::max<int64_t>(0, end - first), 0.0);
  if (visible <= 0 || mass.empty()) return std::vector<float>(mass.size(), 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  thread_local std::vector<float> scores;
  scores.resize(static_cast<size_t>(group) * visible);
  ScoreFp16Keys(q_group, group, keys, head_dim, visible, head_dim, scale, scores.data(), visible);
  const int64_t sink_end = layout.SinkEnd(visible), recent_begin = layout.RecentBegin(visible);
  for (int g = 0; g < group; ++g) {
    float* row = scores.data() + int64_t{g} * visible;
    const float sum = ExpShiftSum(row, visible, MaxOf(row, visible));
    if (!(sum > 0.0f)) continue;
    for (int64_t p = first; p < end; ++p) {
      const int64_t begin = std::max(layout.PageBegin(p), sink_end);
      const int64_t stop = std::min(layout.PageBegin(p + 1), recent_begin);
      double page_sum = 0.0;
      for (int64_t t = begin; t < stop; ++t) page_sum += row[t];
      mass[p - first] += page_sum / sum;
    }
  }
  return std::vector<float>(mass.begin(), mass.end());
}

}  // namespace qevict
