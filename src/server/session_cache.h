// What a kept conversation's cache holds, for the web page's tier strip and for any client:
// GET /v1/sessions/{id}/cache (docs/server.md, "A kept session's cache"), and GET /props (the
// settings the page offers). Only the tiered cache's public view is read (TieredCache::View,
// Stats, config, budget).
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <variant>

#include "kv/kv_cache.h"
#include "kv/tiered_cache.h"
#include "server/api_error.h"
#include "server/server_context.h"
#include "util/memory_stats.h"

namespace qevict::server {

// Per window, how many layers hold it in each tier, plus every layer's tiers as a string of
// digits (0 fp16, 1 quantized, 2 evicted), so that a client can show one layer or find the
// windows a layer promoted. Layers are matched by window index.
nlohmann::json TierMapJson(std::span<const WindowView> layers);

// The cache's bytes (resident, per tier, reserved, cold, budget, floor) and the process's RSS.
nlohmann::json CacheBytesJson(const KvStats& stats, const MemoryStats& memory);

// The report of the kept conversation named `id`: 404 when none is kept under that name.
std::variant<nlohmann::json, ApiError> SessionCacheReport(const ServerContext& ctx,
                                                          const std::string& id);

// GET /props: the model, context, slots and the kv settings a request may choose.
nlohmann::json PropsJson(const ServerContext& ctx);

}  // namespace qevict::server
