#include "policy/observation_scores.h"

#include <algorithm>

#include "util/error.h"

namespace qevict {
namespace {

// Max-pool of tokens[begin, end) over `half` neighbours on each side, within that range.
void PoolSegment(const float* tokens, int64_t begin, int64_t end, int64_t half, float* pooled) {
  for (int64_t t = begin; t < end; ++t) {
    float m = tokens[t];
    for (int64_t u = std::max(begin, t - half); u <= std::min(end - 1, t + half); ++u) {
      m = std::max(m, tokens[u]);
    }
    pooled[t] = m;
  }
}

}  // namespace

void PooledObservationScores(const LayerBand& band, int kernel, HeadReduce reduce,
                             std::vector<float>* scores, int64_t* limit,
                             std::vector<float>* pooled_scratch) {
  const int heads = std::max(1, band.observation_heads);
  QEVICT_CHECK(band.observation.size() % heads == 0);
  const int64_t n = static_cast<int64_t>(band.observation.size()) / heads;
  const int64_t half = kernel / 2;
  const size_t resident = band.observation_offsets.size();
  const size_t in_band = std::min(band.windows.size(), resident);
  // Segments: sinks [0, band_begin), band [band_begin, recent_begin), recent [recent_begin, n).
  const int64_t band_begin = resident > 0 ? band.observation_offsets[0] : n;
  const int64_t recent_begin = in_band < resident ? band.observation_offsets[in_band] : n;

  *limit = band.first_recent_index + static_cast<int64_t>(resident - in_band);
  scores->assign(*limit, 0.0f);
  std::vector<float>& pooled = *pooled_scratch;
  pooled.resize(n);
  for (int h = 0; h < heads; ++h) {
    const float* tokens = band.observation.data() + h * n;
    PoolSegment(tokens, 0, band_begin, half, pooled.data());
    PoolSegment(tokens, band_begin, recent_begin, half, pooled.data());
    PoolSegment(tokens, recent_begin, n, half, pooled.data());
    for (size_t j = 0; j < resident; ++j) {
      const int64_t index = j < in_band
                                ? band.windows[j].index
                                : band.first_recent_index + static_cast<int64_t>(j - in_band);
      const int64_t begin = band.observation_offsets[j];
      const int64_t end = j + 1 < resident ? band.observation_offsets[j + 1] : n;
      float sum = 0.0f;
      for (int64_t t = begin; t < end; ++t) sum += pooled[t];
      float& score = (*scores)[index];
      score = reduce == HeadReduce::kMax ? (h == 0 ? sum : std::max(score, sum))
                                         : score + sum / static_cast<float>(heads);
    }
  }
}

}  // namespace qevict
