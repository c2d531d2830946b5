// Policy variants for ablations in one evaluation: "qevict:recovery=exact:route_every=4" is the
// qevict policy with those options changed, run from the same prefill as every other row. The
// keys are those of the option descriptors marked eval_variant (kv/kv_options.h: the cache's
// and every registered policy's; PolicyVariantKeys() lists them). Options that shape the prefix
// every row forks from (bits, window, sinks, recent, score, snapkv_window, ...) cannot vary
// within one evaluation: they are --kv-* flags for the whole run. The query-aware ranking is a
// policy of its own (qevict-qa), not an option of qevict.
#pragma once

#include <string>

#include "kv/kv_config.h"

namespace qevict {

// The config of a variant: base with the policy and the listed options set. Throws
// qevict::Error naming the bad key or value.
KvConfig ApplyPolicyVariant(const KvConfig& base, const std::string& spec);
// The keys a variant takes, comma-separated.
std::string PolicyVariantKeys();

}  // namespace qevict
