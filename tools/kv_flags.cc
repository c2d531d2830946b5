#include "tools/kv_flags.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/kv_stats_json.h"
#include "engine/reconstruction.h"
#include "kv/kv_options.h"
#include "policy/registry.h"
#include "util/error.h"
#include "util/memory_stats.h"

namespace qevict::cli {

KvConfig KvFlags::Resolve() const {
  KvConfig c = config;
  c.policy = policy;
  for (const auto& [key, text] : given) {
    const KvOptionDef* def = FindKvOption(key);
    if (def == nullptr) throw Error("unknown kv option '" + key + "'");
    SetKvOption(c, *def, ParseKvOptionText(*def, text, KvOptionFlag(*def)));
  }
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
  c.print_stats = stats;
  c.Validate();
  return c;
}

void AddKvFlags(CLI::App& cmd, KvFlags& f, const KvFlagSet& set) {
  std::string names;
  for (const std::string& n : PolicyNames()) names += (names.empty() ? "" : ", ") + n;
  const std::string group = "KV cache";
  if (set.policy) {
    cmd.add_option("--kv-policy", f.policy, "cache policy: " + names)
        ->capture_default_str()
        ->group(group);
  }
  for (const KvOptionDef* def : KvOptions()) {
    const bool budget = def->key == "budget" || def->key == "budget_bytes";
    if (budget && !set.policy) continue;  // the command sets the budget itself (eval --budgets)
    const std::string key(def->key);
    CLI::Option* option = cmd.add_option_function<std::string>(
        KvOptionFlag(*def), [&f, key](const std::string& text) { f.given[key] = text; },
        std::string(def->help));
    option->group(group);
    const std::string shown = KvValueText(*def, KvOptionDefault(*def));
    switch (def->type) {
      case KvOptionType::kInt: option->type_name("INT")->default_str(shown); break;
      case KvOptionType::kNumber: option->type_name("FLOAT")->default_str(shown); break;
      case KvOptionType::kBytes: option->transform(CLI::AsSizeValue(false)); break;
      case KvOptionType::kChoice: option->type_name("TEXT")->default_str(shown); break;
      case KvOptionType::kText: option->type_name("TEXT"); break;
    }
    if (def->key == "budget") {
      cmd.add_option("--kv-ratio", f.ratio,
                     "share of that cache removed, kvpress's compression ratio: --kv-ratio R is "
                     "--kv-budget 1-R")
          ->excludes(option)
          ->group(group);
    }
  }
  if (set.stats) {
    cmd.add_flag("--kv-stats", f.stats,
                 "print a KV cache summary on stderr at the end (bytes kept, saved, tiers)")
        ->group(group);
  }
  if (!set.json_help.empty()) cmd.add_flag("--json", f.json, set.json_help)->group(group);
}

void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options) {
  options.prefill_chunk = flags.Resolve().ForwardBatch(options.prefill_chunk);
}

KvCacheFactory MakeKvCacheFactory(const KvFlags& flags) {
  const KvConfig config = flags.Resolve();
  return [config](const KvGeometry& g, const Rope& rope) {
    return CreateKvCache(config, g, rope);
  };
}

void ApplyReconstruction(const KvFlags& flags, const Tokenizer& tokenizer,
                         const std::string& context, ThreadPool& pool, SessionOptions& options) {
  const KvConfig config = flags.Resolve();
  if (config.policy == "full" || config.score_source != ScoreSource::kReconstruction ||
      !MakePolicy(config)->wants_external_scores()) {
    return;
  }
  std::vector<int32_t> tokens = tokenizer.Encode(context, /*add_bos=*/false, /*parse_special=*/false);
  if (tokens.empty()) {
    std::fprintf(stderr, "warning: --kv-policy %s has no context to reconstruct (give -f): its "
                         "first routing step has no reconstruction scores\n", config.policy.c_str());
    return;
  }
  auto done = std::make_shared<bool>(false);
  options.before_prompt_end = [tokens = std::move(tokens), repeat = RepeatPromptTokens(tokenizer),
                               chunk = config.reconstruction_chunk, done, &pool](Session& s) {
    if (*done || s.policy_cache() == nullptr) return;  // the first prompt only
    *done = true;
    const ReconstructionCost cost = ScoreByReconstruction(s, repeat, tokens, chunk, pool);
    std::fprintf(stderr, "reconstruction scoring: %lld tokens in %lld chunks, %.2f s, %.1f MiB scratch\n",
                 static_cast<long long>(cost.tokens), static_cast<long long>(cost.chunks),
                 cost.seconds, static_cast<double>(cost.scratch_bytes) / (1 << 20));
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
