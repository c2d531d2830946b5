// POST /v1/chat/completions and /v1/completions: parse and validate, tokenize, check the context,
// reserve a slot and KV memory, generate, and answer as one JSON body or as server-sent events.
#pragma once

#include <httplib.h>

#include "server/openai_format.h"
#include "server/server_context.h"

namespace qevict::server {

void HandleCompletion(const ServerContext& context, Endpoint endpoint,
                      const httplib::Request& request, httplib::Response& response);

// Writes an ApiError as the response (status, JSON body).
void SendError(httplib::Response& response, const ApiError& error);

}  // namespace qevict::server
