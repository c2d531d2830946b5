#include "engine/kv_stats_json.h"

#include <algorithm>

#include "util/memory_stats.h"

namespace qevict {

nlohmann::json KvStatsToJson(const KvStats& s) {
  const double full = static_cast<double>(s.full_fp16_bytes);
  nlohmann::json j = {{"tokens_seen", s.tokens_seen},
                      {"tokens_resident", s.tokens_resident},
                      {"resident_bytes", s.resident_bytes()},
                      {"resident_fraction", full > 0 ? s.resident_bytes() / full : 0.0},
                      {"fp16_bytes", s.fp16_bytes},
                      {"quant_bytes", s.quant_bytes},
                      {"meta_bytes", s.meta_bytes},
                      {"cold_bytes", s.cold_bytes},
                      {"budget_bytes", s.budget_bytes},
                      {"full_fp16_bytes", s.full_fp16_bytes},
                      {"peak_bytes", s.peak_bytes},
                      {"prefill_peak_bytes", s.prefill_peak_bytes},
                      {"peak_fp16_bytes", s.peak_fp16_bytes},
                      {"peak_quant_bytes", s.peak_quant_bytes},
                      {"mean_resident_bytes", s.mean_resident_bytes},
                      {"mean_fp16_bytes", s.mean_fp16_bytes},
                      {"mean_quant_bytes", s.mean_quant_bytes},
                      {"cold_peak_bytes", s.cold_peak_bytes},
                      {"pool_reserved_bytes", s.pool_reserved_bytes},
                      {"reserved_bytes", s.reserved_bytes},
                      {"peak_reserved_bytes", s.peak_reserved_bytes},
                      {"compaction_moves", s.compaction_moves},
                      {"routed_reserved_peak_bytes", s.routed_reserved_peak_bytes},
                      {"floor_bytes", s.floor_bytes},
                      {"fp16_windows", s.fp16_windows},
                      {"quant_windows", s.quant_windows},
                      {"evicted_windows", s.evicted_windows},
                      {"promotions", s.promotions},
                      {"demotions", s.demotions},
                      {"evictions", s.evictions},
                      {"routing_steps", s.routing_steps},
                      {"infeasible", s.infeasible}};
  // What the budget is of (--kv-budget-scope); with sliding-window layers also the global
  // layers' part of it, the rings beside it.
  j["budget_scope"] = s.budget_scope_global ? "global" : "all";
  if (s.sliding_layers > 0) {
    j["global_budget_bytes"] = s.global_budget_bytes;
    j["sliding_bytes"] = s.sliding_bytes;
    j["sliding_layers"] = s.sliding_layers;
    j["sliding_window"] = s.sliding_window;
  }
  if (s.cold_written_bytes > 0 || s.cold_windows > 0) {  // the cold tier (qevict-recall)
    j["cold_windows"] = s.cold_windows;
    j["cold_ram_bytes"] = s.cold_ram_bytes;
    j["cold_written_bytes"] = s.cold_written_bytes;
    j["cold_read_bytes"] = s.cold_read_bytes;
    j["cold_score_read_bytes"] = s.cold_score_read_bytes;
    j["cold_page_cache_bytes"] = s.cold_page_cache_bytes;
    j["cold_prefetch_bytes"] = s.cold_prefetch_bytes;
    j["recalls"] = s.recalls;
  }
  if (s.mean_visible_bytes > 0) {  // quest: what decoding attended (resident bytes are full)
    j["mean_attended_bytes"] = s.mean_attended_bytes;
    j["mean_visible_bytes"] = s.mean_visible_bytes;
    j["attended_fraction"] =
        static_cast<double>(s.mean_attended_bytes) / static_cast<double>(s.mean_visible_bytes);
  }
  if (s.prior_seconds > 0.0) j["prior_s"] = s.prior_seconds;
  if (s.routing_seconds > 0.0) j["routing_s"] = s.routing_seconds;
  if (s.external_score_tokens > 0) {  // reconstruction scoring ran (engine/score_hooks.h)
    j["external_score_s"] = s.external_score_seconds;
    j["external_score_tokens"] = s.external_score_tokens;
  }
  if (!s.note.empty()) j["note"] = s.note;
  // The process as the OS sees it, read now: what a user's `top` shows beside the cache's ledger.
  const MemoryStats process = ReadMemoryStats();
  j["rss_bytes"] = process.rss_bytes;
  j["peak_rss_bytes"] = process.peak_rss_bytes;
  return j;
}

bool KvStatsOverBudget(const KvStats& s, int route_every, int window) {
  if (s.budget_bytes < 0 || s.routing_steps == 0 || s.infeasible) return false;
  const int64_t limit = std::max(s.budget_bytes, s.floor_bytes);
  const int64_t mapped_limit = limit + limit / 4 + (int64_t{1} << 20);
  if (s.routed_reserved_peak_bytes > mapped_limit) return true;
  // fp16 bytes of one token over the compressed layers (sliding-window rings apart).
  const int64_t token_bytes = s.tokens_seen > 0 ? s.full_fp16_bytes / s.tokens_seen : 0;
  const int64_t decode_slack =
      static_cast<int64_t>(route_every + window) * token_bytes + s.sliding_bytes;
  return s.peak_bytes > s.prefill_peak_bytes && s.peak_bytes > limit + decode_slack;
}

}  // namespace qevict
