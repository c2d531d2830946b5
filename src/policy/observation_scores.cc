#include "policy/observation_scores.h"

#include <algorithm>

namespace qevict {

void PooledObservationScores(const LayerBand& band, int kernel, std::vector<float>* scores,
                             int64_t* limit, std::vector<float>* pooled_scratch) {
  const std::span<const float> tokens = band.observation;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t half = kernel / 2;
  std::vector<float>& pooled = *pooled_scratch;
  pooled.resize(n);
  for (int64_t t = 0; t < n; ++t) {
    float m = tokens[t];
    for (int64_t u = std::max<int64_t>(0, t - half); u <= std::min(n - 1, t + half); ++u) {
      m = std::max(m, tokens[u]);
    }
    pooled[t] = m;
  }
  const size_t resident = band.observation_offsets.size();
  const size_t in_band = band.windows.size();
  *limit = band.first_recent_index + static_cast<int64_t>(resident - in_band);
  scores->assign(*limit, 0.0f);
  for (size_t j = 0; j < resident; ++j) {
    const int64_t index = j < in_band ? band.windows[j].index
                                      : band.first_recent_index + static_cast<int64_t>(j - in_band);
    const int64_t begin = band.observation_offsets[j];
    const int64_t end = j + 1 < resident ? band.observation_offsets[j + 1] : n;
    float sum = 0.0f;
    for (int64_t t = begin; t < end; ++t) sum += pooled[t];
    (*scores)[index] = sum;
  }
}

}  // namespace qevict
