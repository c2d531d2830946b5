// What admission control reserves for a request: the most KV bytes its cache can hold mapped
// over the run (KvStats::reserved_bytes: the resident ledger plus the pools' slab slack and the
// observation buffer), so that the sum over running requests stays under --kv-memory-limit.
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_cache.h"
#include "kv/kv_config.h"

namespace qevict::server {

// For `full` (or a tiered cache without a budget): every token in fp16. With a budget: the
// budget, or the fp16 floor (sinks + recent region + growing window) when the budget is below
// it, or the prompt stored in fp16 before the first routing step (whole prompt, or one
// kv.prefill_chunk on top of the budget) -- whichever is largest, and never more than every
// token in fp16.
// budget_new_tokens: the new tokens the budget fraction counts when it is not max_new_tokens (a
// request without max_tokens: docs/server.md, "The budget"); < 0: max_new_tokens.
int64_t KvReservationBytes(const KvConfig& config, const KvGeometry& geometry,
                           int64_t prompt_tokens, int64_t max_new_tokens,
                           int64_t budget_new_tokens = -1);

// One line for error messages: "policy qevict, budget 0.1, 37 prompt + 64 new tokens at 23040
// fp16 bytes/token".
std::string DescribeKvRequest(const KvConfig& config, const KvGeometry& geometry,
                              int64_t prompt_tokens, int64_t max_new_tokens);

}  // namespace qevict::server
