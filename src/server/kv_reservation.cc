#include "server/kv_reservation.h"

#include <algorithm>
#include <sstream>

#include "kv/quest_cache.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"

namespace qevict::server {

int64_t KvReservationBytes(const KvConfig& requested, const KvGeometry& geometry,
                           int64_t prompt_tokens, int64_t max_new_tokens,
                           int64_t budget_new_tokens) {
  const KvConfig config = PolicyLayout(requested);  // the window the cache will really have
  const int64_t prompt = std::max<int64_t>(0, prompt_tokens);
  const int64_t run = prompt + std::max<int64_t>(0, max_new_tokens);
  const int64_t rings = geometry.ring_bytes(run);  // sliding layers: a ring of their window
  // recall-oracle (a diagnostic) holds every token in fp16 and nothing else.
  if (config.policy == "full" || config.policy == "recall-oracle") {
    return run * geometry.fp16_bytes_per_token() + rings;
  }
  if (config.policy == "quest") {  // every token in fp16 plus its pages' key bounds
    const int page = static_cast<int>(config.option("quest_page"));
    return run * geometry.fp16_bytes_per_token() + QuestCache::BoundsBytesFor(geometry, page, run) +
           rings;
  }
  const int64_t budget_run =
      budget_new_tokens < 0
          ? run
          : prompt + std::min(budget_new_tokens, std::max<int64_t>(0, max_new_tokens));
  // The tiered cache's own ledger sizes its worst case (kv/tiered_ledger.cc).
  return TieredCache::WorstReservedBytes(config, geometry, *MakePolicy(config), prompt, run,
                                         config.GlobalBudgetBytes(budget_run, geometry)) +
         rings;
}

std::string DescribeKvRequest(const KvConfig& config, const KvGeometry& geometry,
                              int64_t prompt_tokens, int64_t max_new_tokens) {
  std::ostringstream out;
  out << "policy " << config.policy;
  if (config.budget_bytes > 0) {
    out << ", budget_bytes " << config.budget_bytes;
  } else if (config.budget < 1.0) {
    out << ", budget " << config.budget;
  }
  if (config.budget_scope == BudgetScope::kGlobal && config.limited()) {
    out << " of the global layers (+ " << geometry.ring_bytes(prompt_tokens + max_new_tokens)
        << " bytes of sliding-window rings)";
  }
  out << ", " << prompt_tokens << " prompt + " << max_new_tokens << " new tokens at "
      << geometry.fp16_bytes_per_token() << " fp16 bytes/token";
  return out.str();
}

}  // namespace qevict::server
