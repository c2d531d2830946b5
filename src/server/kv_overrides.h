// The request's "kv" extension object: per-request cache settings laid over the server's
// --kv-* defaults, e.g. {"policy": "qevict", "budget": 0.1}. The keys: "policy", "ratio" and
// every option descriptor (kv/kv_options.h) a request may set, by its key, typed and ranged by
// it (KvOptionDef::request_max caps what a request may cost the server).
#pragma once

#include <nlohmann/json.hpp>

#include "kv/kv_config.h"

namespace qevict::server {

// The defaults with the object's keys applied and the result validated. Throws
// RequestRejected (json_fields.h) for a non-object, an unknown key, a wrong type or a value out
// of range, naming the field as "kv.<key>".
KvConfig ApplyKvOverrides(const nlohmann::json& kv, const KvConfig& defaults);

}  // namespace qevict::server
