// SnapKV's query-aware window scores, shared by snapkv/pyramidkv and qevict-qa: the attention of
// the last prompt queries on every resident token (LayerBand::observation, one row per KV head)
// is max-pooled over `kernel` neighbouring tokens and summed per window; the heads' window scores
// are then reduced to one per window (the decision is shared by the layer's KV heads).
//
// Pooling never crosses a segment boundary: the sinks, the band, and the recent windows are
// pooled separately. SnapKV pools the prefix before its observation window only (the window's
// own tokens are kept whatever their score); here the sinks and the recent region are kept
// anyway, so their large attention (the sink, the question's own diagonal) must not spill into
// the neighbouring band windows.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/routing.h"

namespace qevict {

enum class HeadReduce {
  kMax,   // a window counts as much as the KV head that wants it most (SnapKV selects per head)
  kMean,  // averaged over KV heads (the spec's head averaging of attention mass)
};

// scores[window index] for every resident window with index < *limit (band and recent; an
// evicted window's entry is 0). *limit is one past the newest resident window's index.
void PooledObservationScores(const LayerBand& band, int kernel, HeadReduce reduce,
                             std::vector<float>* scores, int64_t* limit,
                             std::vector<float>* pooled_scratch);

}  // namespace qevict
