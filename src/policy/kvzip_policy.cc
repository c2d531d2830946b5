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
namespace {

const PolicyRegistration kKvzipRegistration({
    .name = "kvzip",
    .description =
        "KVzip: once after the prompt, fp16 windows by reconstruction score (--kv-score-source)",
    .order = 110,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<SnapKvPolicy>(c, /*external=*/true);
    },
});

}  // namespace

}  // namespace qevict
