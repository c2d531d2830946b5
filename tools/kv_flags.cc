#include "tools/kv_flags.h"

#include <cstdio>
#include <memory>
#include <sstream>

#include "kv/kv_options.h"
#include "policy/registry.h"
#include "util/error.h"

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
  for (const std::string& n : PolicyNames()) {
    names += (names.empty() ? "" : ", ") + n;
    if (IsDiagnosticPolicy(n)) names += " (a diagnostic, not for use)";
  }
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

}  // namespace qevict::cli
