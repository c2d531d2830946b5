// The request's "kv" extension object: per-request cache settings laid over the server's
// --kv-* defaults, e.g. {"policy": "qevict", "budget": 0.1}. Keys follow KvConfig's names.
#pragma once

#include <nlohmann/json.hpp>

#include "kv/kv_config.h"

namespace qevict::server {

// The defaults with the object's keys applied and the result validated. Throws
// RequestRejected (json_fields.h) for a non-object, an unknown key, a wrong type or a value out
// of range, naming the field as "kv.<key>".
KvConfig ApplyKvOverrides(const nlohmann::json& kv, const KvConfig& defaults);

}  // namespace qevict::server
