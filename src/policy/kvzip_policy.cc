// kvzip: KVzip (Kim et al. 2025) on windows: SnapKV's one-shot fp16 selection
// (snapkv_policy.h: decided at the first prompt end, never rescored, later windows kept newest
// first) ranked by an external score instead of the question's pooled attention: by default the
// reconstruction score (engine/reconstruction.h), or --kv-score-source expected-attention /
// key-norm (kv/window_priors.h) -- the latter two make it the "other scores at equal bytes" of an
// evict-only cache. Between prompt chunks (bounded prefill), before a score exists, windows are
// kept newest first.
#include "policy/policies.h"
#include "policy/snapkv_policy.h"

namespace qevict {

std::unique_ptr<Policy> MakeKvzipPolicy(const KvConfig& config) {
  return std::make_unique<SnapKvPolicy>(config, /*external=*/true);
}

}  // namespace qevict
