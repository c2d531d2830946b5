#include "tools/kv_flags.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/kv_stats_json.h"
#include "policy/registry.h"
#include "util/error.h"
#include "util/memory_stats.h"

namespace qevict::cli {

KvConfig KvFlags::Resolve() const {
  KvConfig c = config;
  c.policy = policy;
  if (ratio >= 0.0) {
    if (!(ratio < 1.0)) {
      std::ostringstream value;
      value << ratio;
      throw Error("--kv-ratio " + value.str() +
                  ": must be in [0, 1), the share of the cache removed (--kv-ratio 0.9 is "
                  "--kv-budget 0.1)");
    }
    c.budget = 1.0 - ratio;
  }
  c.recovery = ParseRecoveryFidelity(recovery);
  c.score = ParseScoreMode(score);
  c.score_source = ParseScoreSource(score_source);
  c.print_stats = stats;
  c.Validate();
  return c;
}

void AddKvFlags(CLI::App& cmd, KvFlags& f, const KvFlagSet& set) {
  std::string names;
  for (const std::string& n : PolicyNames()) names += (names.empty() ? "" : ", ") + n;
  KvConfig& c = f.config;
  const std::string group = "KV cache";
  if (set.policy) {
    cmd.add_option("--kv-policy", f.policy, "cache policy: " + names)
        ->capture_default_str()
        ->group(group);
    CLI::Option* budget =
        cmd.add_option("--kv-budget", c.budget,
                       "KV bytes kept, as a fraction of an fp16 cache of every token the run can "
                       "hold (prompt + new tokens), (0, 1]; 1: no limit")
            ->capture_default_str()
            ->group(group);
    cmd.add_option("--kv-ratio", f.ratio,
                   "share of that cache removed, kvpress's compression ratio: --kv-ratio R is "
                   "--kv-budget 1-R")
        ->excludes(budget)
        ->group(group);
    cmd.add_option("--kv-budget-bytes", c.budget_bytes,
                   "absolute cap on KV bytes (e.g. 512k, 64m), instead of a fraction")
        ->transform(CLI::AsSizeValue(false))
        ->group(group);
  }
  cmd.add_option("--kv-bits", c.bits, "bits of the quantized tier: 2, 4 or 8")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-window", c.window, "tokens per window")->capture_default_str()->group(group);
  cmd.add_option("--kv-sinks", c.sinks, "first tokens kept in fp16")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-recent", c.recent, "last tokens kept in fp16")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-route-every", c.route_every, "generated tokens between routing steps")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-q-share", c.q_share, "share of the band's bytes for the quantized tier")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-prefill-q-share", c.prefill_q_share,
                 "qevict/qevict-qa between prompt chunks: the quantized tier's share of the band "
                 "(1: archive rather than evict until the prompt's end ranks the windows)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-hysteresis", c.hysteresis,
                 "margin a quantized window's score must exceed an fp16 window's by to swap")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-score", f.score, "importance: cumulative, decay or normalized")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-score-source", f.score_source,
                 "qevict-zip/kvzip: scores of the first routing step: reconstruction (KVzip), "
                 "expected-attention or key-norm")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-score-decay", c.score_decay, "decay per query for --kv-score decay")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-recovery", f.recovery,
                 "what promotion restores: paper (dequantized codes) or exact (cold store)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-cold-dir", c.cold_store_dir, "directory of the exact-recovery cold store")
      ->group(group);
  cmd.add_option("--kv-prefill-chunk", c.prefill_chunk,
                 "with a budget, route after every prompt chunk of this many tokens: the cache peaks "
                 "at budget + one chunk (0: route once, after the whole prompt, as the paper)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-query-kernel", c.query_kernel,
                 "qevict-qa: max-pool kernel over the question's token attention (odd)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-snapkv-window", c.snapkv_window, "snapkv/pyramidkv observation window")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-snapkv-kernel", c.snapkv_kernel, "snapkv/pyramidkv max-pool kernel")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-pyramid-beta", c.pyramid_beta, "pyramidkv: the last layer gets the mean band budget / beta")
      ->capture_default_str()
      ->group(group);
  if (set.stats) {
    cmd.add_flag("--kv-stats", f.stats,
                 "print a KV cache summary on stderr at the end (bytes kept, saved, tiers)")
        ->group(group);
  }
  if (!set.json_help.empty()) cmd.add_flag("--json", f.json, set.json_help)->group(group);
}

void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options) {
  options.prefill_chunk = flags.config.ForwardBatch(options.prefill_chunk);
}

KvCacheFactory MakeKvCacheFactory(const KvFlags& flags) {
  const KvConfig config = flags.Resolve();
  return [config](const KvGeometry& g, const Rope& rope) {
    return CreateKvCache(config, g, rope);
  };
}

bool WarnIfInfeasible(const KvStats& s) {
  if (!s.infeasible) return false;
  std::fprintf(stderr, "warning: the KV budget cannot be met: %s\n", s.note.c_str());
  return true;
}

namespace {

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string Percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

}  // namespace

std::string KvStatsSummary(const std::string& policy, const KvStats& s) {
  const MemoryStats memory = ReadMemoryStats();
  const int64_t full = s.full_fp16_bytes + s.sliding_bytes;  // what `full` would hold now
  const int64_t resident = s.resident_bytes();
  std::string out = "kv cache: " + policy;
  if (s.budget_bytes >= 0) {
    out += ", budget " + MiB(s.budget_bytes);
    if (s.floor_bytes >= 0) out += " (floor " + MiB(s.floor_bytes) + ")";
  } else {
    out += ", no budget";
  }
  out += "\n  resident " + MiB(resident) + " = " + Percent(resident, full) + " of the fp16 cache's " +
         MiB(full) + ": saved " + MiB(std::max<int64_t>(0, full - resident)) + " (" +
         Percent(std::max<int64_t>(0, full - resident), full) + ")";
  out += "\n  tiers: fp16 " + MiB(s.fp16_bytes) + ", quantized " + MiB(s.quant_bytes) +
         ", metadata " + MiB(s.meta_bytes);
  if (s.sliding_layers > 0) {
    out += " (sliding-window rings " + MiB(s.sliding_bytes) + " in fp16)";
  }
  if (s.cold_bytes > 0) out += "; exact-recovery cold store " + MiB(s.cold_bytes) + " on disk";
  out += "\n  reserved from the OS " + MiB(s.reserved_bytes) + " (pools and buffers); process RSS " +
         MiB(memory.rss_bytes) + " (peak " + MiB(memory.peak_rss_bytes) + ")";
  out += "\n  tokens " + std::to_string(s.tokens_seen) + " seen, " +
         std::to_string(s.tokens_resident) + " resident; windows " +
         std::to_string(s.fp16_windows) + " fp16, " + std::to_string(s.quant_windows) +
         " quantized, " + std::to_string(s.evicted_windows) + " evicted; promotions " +
         std::to_string(s.promotions) + ", demotions " + std::to_string(s.demotions) +
         ", routing steps " + std::to_string(s.routing_steps);
  if (s.budget_bytes >= 0 && s.peak_bytes > s.budget_bytes) {
    out += "\n  OVER BUDGET: peak " + MiB(s.peak_bytes) +
           (s.prefill_peak_bytes >= s.peak_bytes
                ? " while the prompt was read: each prompt chunk is held in fp16 until the cache "
                  "routes it (--kv-prefill-chunk sets the chunk; 0 holds the whole prompt)"
                : std::string(" after routing"));
  }
  if (s.infeasible) out += "\n  INFEASIBLE: " + s.note;
  return out + "\n";
}

void PrintKvStats(const KvFlags& flags, const KvStats& s) {
  if (!flags.stats && !flags.json) return;
  std::fputs(KvStatsSummary(flags.policy, s).c_str(), stderr);
  if (flags.json) {
    nlohmann::json j = KvStatsToJson(s);
    j["policy"] = flags.policy;
    std::fprintf(stderr, "%s\n", j.dump().c_str());
  }
}

}  // namespace qevict::cli
