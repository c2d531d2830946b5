#include "tools/kv_stats_summary.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/kv_stats_json.h"
#include "util/memory_stats.h"

namespace qevict::cli {
namespace {

std::string SummaryMiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string SummaryPercent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

// The bytes the cache promises not to exceed once routed: the budget, or its floor when the
// budget is below it.
int64_t Limit(const KvStats& s) { return std::max(s.budget_bytes, s.floor_bytes); }

// What the budget is of (--kv-budget-scope) and, with sliding-window layers, its global layers'
// part beside the rings: the part the policy's cache is held to, and what those layers hold.
std::string BudgetScopeLines(const KvStatsContext& c, const KvStats& s) {
  if (s.sliding_layers == 0) return s.budget_scope_global ? " (scope global)" : "";
  const std::string global_layers =
      c.n_layers > s.sliding_layers
          ? "the " + std::to_string(c.n_layers - s.sliding_layers) + " global layers"
          : "the global layers";
  const std::string rings =
      "the " + std::to_string(s.sliding_layers) + " sliding-window layers' rings";
  std::string out =
      s.budget_scope_global
          ? "\n  budget scope global: " + SummaryMiB(s.global_budget_bytes) + " for " +
                global_layers + " (the fraction is of their fp16 cache), plus " +
                SummaryMiB(s.budget_bytes - s.global_budget_bytes) + " for " + rings +
                ", paid on top"
          : "\n  budget scope all: the fraction is of the whole cache, " + rings +
                " included; they leave " + global_layers + " " + SummaryMiB(s.global_budget_bytes);
  return out + "\n  global layers resident " + SummaryMiB(s.resident_bytes() - s.sliding_bytes) +
         " (their budget " + SummaryMiB(s.global_budget_bytes) + "), rings " +
         SummaryMiB(s.sliding_bytes);
}

// How many fp16 windows a layer the budget leaves above the floor: the room the policy has for
// what it selects or recalls. A budget is a share of the fp16 cache and the floor a fixed
// number of tokens, so on a short prompt a budget can sit just above it. Models without
// sliding-window layers only (their fp16 bytes a token and layer follow from the totals); empty
// where it does not apply.
std::string FloorRoomLine(const KvStatsContext& c, const KvStats& s) {
  if (s.sliding_layers > 0 || s.infeasible || s.budget_bytes < 0 || s.floor_bytes < 0 ||
      s.budget_bytes < s.floor_bytes || s.tokens_seen <= 0 || c.n_layers <= 0 || c.window <= 0) {
    return "";
  }
  const double window_bytes = static_cast<double>(s.full_fp16_bytes) /
                              static_cast<double>(s.tokens_seen) / c.n_layers * c.window;
  if (window_bytes <= 0.0) return "";
  const int64_t room = s.budget_bytes - s.floor_bytes;
  const double windows = static_cast<double>(room) / c.n_layers / window_bytes;
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "\n  room above the floor: %s, %.1f fp16 windows a layer (%.1f KiB each)",
                SummaryMiB(room).c_str(), windows, window_bytes / 1024.0);
  std::string out = buf;
  if (windows < 1.0) {
    out +=
        "\n    less than one a layer: the policy can keep almost nothing beyond the sinks and "
        "the recent tokens\n    (a short prompt needs a larger --kv-budget than a long one)";
  }
  return out;
}

}  // namespace

KvStatsContext MakeKvStatsContext(const KvFlags& flags, int n_layers) {
  KvStatsContext c;
  c.policy = flags.policy;
  c.prefill_chunk = flags.config.prefill_chunk;
  c.route_every = flags.config.route_every;
  c.window = flags.config.window;
  c.n_layers = n_layers;
  return c;
}

std::string KvStatsSummary(const KvStatsContext& c, const KvStats& s) {
  const MemoryStats memory = ReadMemoryStats();
  const int64_t full = s.full_fp16_bytes;  // what `full` would hold now, rings included
  const int64_t resident = s.resident_bytes();
  const bool budget = s.budget_bytes >= 0;
  std::string out = "kv cache: " + c.policy;
  if (budget) {
    out += ", budget " + SummaryMiB(s.budget_bytes);
    if (s.floor_bytes >= 0) out += ", floor " + SummaryMiB(s.floor_bytes);
    out += BudgetScopeLines(c, s);
    out += FloorRoomLine(c, s);
  } else {
    out += ", no budget";
    if (!s.infeasible && !s.note.empty()) out += " of resident bytes (" + s.note + ")";
  }
  out += "\n  resident " + SummaryMiB(resident) + " = " + SummaryPercent(resident, full) +
         " of the fp16 cache's " + SummaryMiB(full) + ": saved " +
         SummaryMiB(std::max<int64_t>(0, full - resident)) + " (" +
         SummaryPercent(std::max<int64_t>(0, full - resident), full) + ")";
  out += "\n  tiers: fp16 " + SummaryMiB(s.fp16_bytes) + ", 2-bit/quantized " +
         SummaryMiB(s.quant_bytes) + ", metadata " + SummaryMiB(s.meta_bytes);
  if (s.sliding_layers > 0) {
    out += " (sliding-window rings " + SummaryMiB(s.sliding_bytes) + " in fp16)";
  }
  // The cold tier always holds RAM (each layer's last query); exact recovery's store alone none.
  const bool cold_tier = s.cold_ram_bytes > 0 || s.cold_windows > 0;
  if (!cold_tier && s.cold_written_bytes > 0) {
    out += "; exact-recovery cold store " + SummaryMiB(s.cold_bytes) + " on disk (written " +
           SummaryMiB(s.cold_written_bytes) + ", read back " + SummaryMiB(s.cold_read_bytes) + ")";
  }
  if (cold_tier) {  // the cold tier (qevict-recall)
    out += "\n  cold tier: " + std::to_string(s.cold_windows) + " windows on disk (" +
           SummaryMiB(s.cold_bytes) + ", exact; not resident; " +
           (s.cold_page_cache_bytes >= 0 ? SummaryMiB(s.cold_page_cache_bytes) : std::string("?")) +
           " of it in the OS page cache, in no RSS), their digests and records " +
           SummaryMiB(s.cold_ram_bytes) + " in RAM (inside metadata)\n    written " +
           SummaryMiB(s.cold_written_bytes) + ", read back " + SummaryMiB(s.cold_read_bytes) +
           " (" + SummaryMiB(s.cold_score_read_bytes) + " to score recall candidates; " +
           SummaryMiB(s.cold_prefetch_bytes) + " read ahead by the kernel for the next layer), " +
           std::to_string(s.recalls) + " windows recalled into fp16";
  }
  out += "\n  reserved " + SummaryMiB(s.reserved_bytes) + "; process RSS " +
         SummaryMiB(memory.rss_bytes) + " (peak " + SummaryMiB(memory.peak_rss_bytes) + ")";
  if (budget && s.prefill_peak_bytes > Limit(s)) {
    out += "\n  peak " + SummaryMiB(s.prefill_peak_bytes) + " while the prompt was read: ";
    out += c.prefill_chunk > 0
               ? "up to one " + std::to_string(c.prefill_chunk) +
                     "-token chunk of it held in fp16 on top of the budget until the cache "
                     "routes it\n    (bounded prefill, as expected; --kv-prefill-chunk sets the "
                     "chunk)"
               : std::string(
                     "the whole prompt held in fp16 until its end is routed\n    "
                     "(--kv-prefill-chunk 0, the paper's mode; a chunk size bounds it)");
  }
  // Sliding-window layers keep rings, not windows: the counts cover the other layers.
  const int layers_counted = c.n_layers - s.sliding_layers;
  const std::string layers = layers_counted > 0
                                 ? "summed over the " + std::to_string(layers_counted) + " " +
                                       (s.sliding_layers > 0 ? "global " : "") + "layers"
                                 : "summed over the layers";
  out += "\n  tokens " + std::to_string(s.tokens_seen) + " seen, " +
         std::to_string(s.tokens_resident) + " resident";
  const bool windows = s.routing_steps > 0 || s.fp16_windows + s.quant_windows > 0;
  if (windows) {  // `full` keeps tokens, not windows
    out += "; windows (" + layers + ") " + std::to_string(s.fp16_windows) + " fp16, " +
           std::to_string(s.quant_windows) + " quantized, " + std::to_string(s.evicted_windows) +
           " evicted; promotions " + std::to_string(s.promotions) + ", demotions " +
           std::to_string(s.demotions) + ", routing steps " + std::to_string(s.routing_steps);
    if (s.routing_seconds > 0.0) {
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.1f", 1e3 * s.routing_seconds);
      out += std::string(" (") + ms + " ms in all, recalls included)";
    }
  }
  if (s.mean_visible_bytes > 0) {  // quest: the budget caps attention, not memory
    out += "\n  attended per generated token " + SummaryMiB(s.mean_attended_bytes) + " = " +
           SummaryPercent(s.mean_attended_bytes, s.mean_visible_bytes) + " of the " +
           SummaryMiB(s.mean_visible_bytes) + " full attention reads (global layers)";
  }
  if (KvStatsOverBudget(s, c.route_every, c.window)) {
    out += "\n  OVER BUDGET: once routed the cache held " + SummaryMiB(s.peak_bytes) + " (mapped " +
           SummaryMiB(s.routed_reserved_peak_bytes) +
           "), more than its budget or floor allows\n    (docs/kv-cache.md, \"Memory\"): a bug; "
           "please report it with the command line";
  }
  if (s.infeasible) out += "\n  INFEASIBLE: " + s.note;
  out +=
      "\n  resident: the bytes held for the tokens, which the budget caps; reserved: the "
      "memory mapped\n    from the OS for them (whole slabs, policy buffers)";
  if (budget) out += "; floor: the least any budget leaves\n    (sinks, recent windows, positions)";
  if (windows) out += "; a window: " + std::to_string(c.window) + " tokens of one layer";
  return out + "\n";
}

void PrintKvStats(const KvFlags& flags, const KvStats& s, int n_layers) {
  if (!flags.stats && !flags.json) return;
  std::fputs(KvStatsSummary(MakeKvStatsContext(flags, n_layers), s).c_str(), stderr);
  if (flags.json) {
    nlohmann::json j = KvStatsToJson(s);
    j["policy"] = flags.policy;
    j["over_budget"] = KvStatsOverBudget(s, flags.config.route_every, flags.config.window);
    std::fprintf(stderr, "%s\n", j.dump().c_str());
  }
}

bool WarnIfInfeasible(const KvStats& s) {
  if (!s.infeasible) return false;
  std::fprintf(stderr, "warning: the KV budget cannot be met: %s\n", s.note.c_str());
  return true;
}

}  // namespace qevict::cli
