// SnapKV's query-aware window scores, shared by snapkv/pyramidkv and qevict: the attention of
// the last prompt queries on every resident token (LayerBand::observation) is max-pooled over
// `kernel` neighbouring tokens and summed per window.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/routing.h"

namespace qevict {

// scores[window index] for every resident window with index < *limit (band and recent; an
// evicted window's entry is 0). *limit is one past the newest resident window's index.
void PooledObservationScores(const LayerBand& band, int kernel, std::vector<float>* scores,
                             int64_t* limit, std::vector<float>* pooled_scratch);

}  // namespace qevict
