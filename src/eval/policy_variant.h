// Policy variants for ablations in one evaluation: "qevict:recovery=exact:route_every=4" is the
// qevict policy with those options changed, run from the same prefill as every other row. Keys:
// recovery (paper|exact), route_every, q_share, prefill_q_share, hysteresis, query_kernel,
// snapkv_kernel, pyramid_beta, h2o_recent_share, and for qevict-zip / kvzip score_source
// (reconstruction|expected-attention|key-norm), reconstruction_chunk, expected_future. Options that change the cache's layout (bits, window, sinks,
// recent) cannot vary within one evaluation: they are --kv-* flags for the whole run. The
// query-aware ranking is a policy of its own (qevict-qa), not an option of qevict.
#pragma once

#include <string>

#include "kv/kv_config.h"

namespace qevict {

// The config of a variant: base with the policy and the listed options set. Throws
// qevict::Error naming the bad key or value.
KvConfig ApplyPolicyVariant(const KvConfig& base, const std::string& spec);

}  // namespace qevict
