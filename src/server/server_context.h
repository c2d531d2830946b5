// What the HTTP handlers share: the loaded model, the request defaults, the scheduler and the
// metrics. Owned by Server; handlers hold a const reference for the server's lifetime.
#pragma once

#include <cstdint>
#include <string>

#include "engine/loaded_model.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/session_store.h"
#include "server/slot_scheduler.h"

namespace qevict::server {

struct ServerContext {
  const LoadedModel* model = nullptr;
  std::string model_id;            // what /v1/models lists and responses name
  std::string build_info;          // the binary's source revision (/props)
  int64_t created = 0;             // unix seconds the server started
  RequestDefaults defaults;        // --kv-* flags, context, vocabulary
  int64_t default_max_tokens = 0;  // 0: OpenAI's defaults (chat: rest of context; completions: 16)
  int batch = 256;                 // prompt tokens per forward pass
  SlotScheduler* scheduler = nullptr;
  ServerMetrics* metrics = nullptr;
  SessionStore* sessions = nullptr;  // kept conversations (nullptr: none)
};

}  // namespace qevict::server
