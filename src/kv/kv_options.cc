// The cache's own options, declared once (the policies declare theirs in their own files), and
// everything generated from the descriptors: parsing, ranges, Validate()'s per-option checks,
// KvConfigKey(), KvOptionDocs(), the docs' options table and the policy names.
#include "kv/kv_options.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <type_traits>

#include "util/error.h"

namespace qevict {
namespace {

// Binds a KvConfig field of a plain type (int, int64_t, double, std::string).
// The digest kinds, the cold tier's default (kv_config.h) first.
std::vector<std::string_view> DigestChoices() {
  std::vector<std::string_view> names = {DigestKindName(KvConfig().cold_digest)};
  for (DigestKind kind : kAllDigestKinds) {
    if (names.front() != DigestKindName(kind)) names.push_back(DigestKindName(kind));
  }
  return names;
}

template <auto Field>
KvValue GetField(const KvConfig& c) {
  using T = std::remove_cvref_t<decltype(c.*Field)>;
  if constexpr (std::is_same_v<T, std::string>) {
    return c.*Field;
  } else {
    return static_cast<double>(c.*Field);
  }
}

template <auto Field>
void SetField(KvConfig& c, const KvValue& v) {
  using T = std::remove_cvref_t<decltype(c.*Field)>;
  if constexpr (std::is_same_v<T, std::string>) {
    c.*Field = std::get<std::string>(v);
  } else {
    c.*Field = static_cast<T>(std::get<double>(v));
  }
}

constexpr double kMaxRecent = 1 << 20;

// The cache's options, in the docs table's order.
const std::vector<KvOptionDef>& CacheOptions() {
  using T = KvOptionType;
  static const std::vector<KvOptionDef> options = {
      {.key = "budget",
       .help = "resident KV bytes as a fraction of the fp16 cache of prompt + new tokens "
               "(1.0 = no limit)",
       .doc = "fraction of the fp16 cache of every token the run can hold (prompt + new "
              "tokens); 1.0 = no limit. The same meaning in `run`, `chat`, `serve` (a chat "
              "request without `max_tokens` counts its prompt + 128 new tokens: docs/server.md) "
              "and `eval --budgets`",
       .min = 0.0,
       .max = 1.0,
       .min_open = true,
       .range_note = " (a fraction of the fp16 cache of prompt + new tokens)",
       .get = &GetField<&KvConfig::budget>,
       .set = &SetField<&KvConfig::budget>},
      {.key = "budget_bytes",
       .type = T::kBytes,
       .help = "absolute cap on resident KV bytes (replaces --kv-budget)",
       .doc = "absolute cap (replaces `--kv-budget`); takes size suffixes (`512k`, `64m`)",
       .min = 1,
       .range_note = " (a positive number of bytes)",
       .request_max = static_cast<double>(int64_t{1} << 50),
       .get = &GetField<&KvConfig::budget_bytes>,
       .set = &SetField<&KvConfig::budget_bytes>},
      {.key = "budget_scope",
       .type = T::kChoice,
       .help = "what a budget (--kv-budget, --kv-budget-bytes, eval --budgets) is of on a model "
               "with sliding-window layers: all (the whole cache, rings included) or global (the "
               "global layers' fp16 cache, the rings paid on top)",
       .doc = "what a budget (`--kv-budget`, `--kv-budget-bytes`, `eval --budgets`) is of on a "
              "model with sliding-window layers (Gemma 3): `all`, the whole cache, the layers' "
              "fixed rings included; `global`, the global layers' fp16 cache (what grows with "
              "the context), the rings paid on top and reported beside it (\"Budget\"). The "
              "same on a model without sliding layers",
       .origin = "ours (`global`: issue 38's Gemma cells)",
       .choices = {"all", "global"},
       .eval_variant = true,
       .get = [](const KvConfig& c) { return KvValue(BudgetScopeName(c.budget_scope)); },
       .set =
           [](KvConfig& c, const KvValue& v) {
             c.budget_scope = ParseBudgetScope(std::get<std::string>(v));
           }},
      {.key = "bits",
       .type = T::kInt,
       .help = "bit-width of the quantized tier: 2, 4 or 8",
       .doc = "quantized tier width: 2, 4, 8",
       .one_of = {2, 4, 8},
       .get = &GetField<&KvConfig::bits>,
       .set = &SetField<&KvConfig::bits>},
      {.key = "window",
       .type = T::kInt,
       .help = "W: tokens per window (the unit of tier decisions)",
       .min = 1,
       .max = 1024,
       .get = &GetField<&KvConfig::window>,
       .set = &SetField<&KvConfig::window>},
      {.key = "sinks",
       .type = T::kInt,
       .help = "S: first tokens kept in fp16",
       .min = 0,
       .max = 1024,
       .get = &GetField<&KvConfig::sinks>,
       .set = &SetField<&KvConfig::sinks>},
      {.key = "recent",
       .type = T::kInt,
       .help = "R: last tokens kept in fp16",
       .min = 0,
       .max = kMaxRecent,
       .get = &GetField<&KvConfig::recent>,
       .set = &SetField<&KvConfig::recent>},
      {.key = "route_every",
       .type = T::kInt,
       .help = "Ω: generated tokens between routing steps",
       .min = 1,
       .request_max = kMaxRecent,
       .eval_variant = true,
       .get = &GetField<&KvConfig::route_every>,
       .set = &SetField<&KvConfig::route_every>},
      {.key = "q_share",
       .help = "share of the band's bytes given to the quantized tier",
       .doc = "quantized share of the band budget",
       .origin = "*choice* (spec)",
       .our_choice = true,
       .min = 0,
       .max = 1,
       .eval_variant = true,
       .get = &GetField<&KvConfig::q_share>,
       .set = &SetField<&KvConfig::q_share>},
      {.key = "prefill_q_share",
       .help = "qevict/qevict-qa between prompt chunks (bounded prefill): the quantized tier's "
               "share of the band, so that windows are archived rather than evicted before the "
               "prompt's end ranks them",
       .doc = "`qevict` / `qevict-qa` at the routing steps between prompt chunks (bounded "
              "prefill): the quantized share of the band, so the band is archived in 2 bits "
              "rather than evicted before the prompt's end ranks it",
       .origin = "*choice* (ours: the paper routes only after the prompt)",
       .our_choice = true,
       .min = 0,
       .max = 1,
       .eval_variant = true,
       .get = &GetField<&KvConfig::prefill_q_share>,
       .set = &SetField<&KvConfig::prefill_q_share>},
      {.key = "recovery",
       .type = T::kChoice,
       .help = "promoted windows hold dequantized codes (paper) or exact fp16 originals from a "
               "cold store (exact)",
       .choices = {"paper", "exact"},
       .eval_variant = true,
       .get = [](const KvConfig& c) { return KvValue(RecoveryFidelityName(c.recovery)); },
       .set =
           [](KvConfig& c, const KvValue& v) {
             c.recovery = ParseRecoveryFidelity(std::get<std::string>(v));
           }},
      {.key = "prefill_chunk",
       .type = T::kInt,
       .help = "with a budget, route after every prompt chunk of this many tokens so the cache "
               "peaks at budget + one chunk (0 = the paper's mode: route once, after the whole "
               "prompt)",
       .origin = "*choice* (the spec asks for bounded prefill by default; 512 tokens is about "
                 "11.5 MiB of fp16 KV on SmolLM2)",
       .our_choice = true,
       .min = 0,
       .range_note = " (0 = route only after the prompt)",
       .request_max = 4096,
       .get = &GetField<&KvConfig::prefill_chunk>,
       .set = &SetField<&KvConfig::prefill_chunk>},
      {.key = "hysteresis",
       .help = "a quantized window is promoted only if its score beats the fp16 window's by this "
               "fraction",
       .origin = "*choice* (spec)",
       .our_choice = true,
       .min = 0,
       .request_max = 1e6,
       .eval_variant = true,
       .get = &GetField<&KvConfig::hysteresis>,
       .set = &SetField<&KvConfig::hysteresis>},
      {.key = "score",
       .type = T::kChoice,
       .help = "importance: cumulative (H2O), decay, normalized (ZipCache)",
       .origin = "*choice* (spec)",
       .our_choice = true,
       .choices = {"cumulative", "decay", "normalized"},
       .get = [](const KvConfig& c) { return KvValue(ScoreModeName(c.score)); },
       .set = [](KvConfig& c,
                 const KvValue& v) { c.score = ParseScoreMode(std::get<std::string>(v)); }},
      {.key = "score_decay",
       .help = "per-query decay factor of --kv-score decay",
       .origin = "*choice*",
       .our_choice = true,
       .min = 0,
       .max = 1,
       .min_open = true,
       .get = &GetField<&KvConfig::score_decay>,
       .set = &SetField<&KvConfig::score_decay>},
      {.key = "score_source",
       .type = T::kChoice,
       .help = "qevict-zip/kvzip: scores of the first routing: reconstruction (KVzip), "
               "expected-attention, key-norm",
       .policies = "qevict-zip kvzip",
       .doc = "`qevict-zip` / `kvzip`: the score of the first routing step: `reconstruction` "
              "(KVzip), `expected-attention`, `key-norm` (\"Score sources\")",
       .origin = "ours (reconstruction: KVzip's method)",
       .choices = {"reconstruction", "expected-attention", "key-norm"},
       .eval_variant = true,
       .get = [](const KvConfig& c) { return KvValue(ScoreSourceName(c.score_source)); },
       .set =
           [](KvConfig& c, const KvValue& v) {
             c.score_source = ParseScoreSource(std::get<std::string>(v));
           }},
      {.key = "reconstruction_chunk",
       .type = T::kInt,
       .help = "reconstruction scoring: context tokens per forward pass",
       .policies = "qevict-zip kvzip",
       .origin = "*choice*",
       .our_choice = true,
       .min = 16,
       .range_note = " tokens",
       .request_max = 4096,
       .eval_variant = true,
       .get = &GetField<&KvConfig::reconstruction_chunk>,
       .set = &SetField<&KvConfig::reconstruction_chunk>},
      {.key = "expected_future",
       .type = T::kInt,
       .help = "expected attention: future positions the query statistics are projected over",
       .policies = "qevict-zip kvzip",
       .origin = "*choice*",
       .our_choice = true,
       .min = 1,
       .range_note = " positions",
       .request_max = kMaxRecent,
       .eval_variant = true,
       .get = &GetField<&KvConfig::expected_future>,
       .set = &SetField<&KvConfig::expected_future>},
      {.key = "value_group",
       .type = T::kInt,
       .help = "values are quantized per token in groups of this many channels",
       .origin = "*choice* (spec)",
       .our_choice = true,
       .min = 1,
       .request_max = 1024,
       .get = &GetField<&KvConfig::value_group>,
       .set = &SetField<&KvConfig::value_group>},
      {.key = "snapkv_window",
       .type = T::kInt,
       .help = "observation window: last prompt queries that score the prompt "
               "(snapkv/pyramidkv/qevict-qa, expected attention)",
       .origin = "SnapKV",
       .min = 1,
       .request_max = 4096,
       .get = &GetField<&KvConfig::snapkv_window>,
       .set = &SetField<&KvConfig::snapkv_window>},
      {.key = "cold_store_dir",
       .type = T::kText,
       .help = "directory of the exact-recovery cold-store file",
       .flag = "--kv-cold-dir",
       .origin = "*choice*",
       .our_choice = true,
       .request = false,  // a request must not pick where the server writes files
       .get = &GetField<&KvConfig::cold_store_dir>,
       .set = &SetField<&KvConfig::cold_store_dir>,
       .default_doc = "`$TMPDIR` or `/tmp`"},
      {.key = "cold_digest",
       .type = T::kChoice,
       .help = "cold tier (qevict-recall): the digest kept in RAM per cold window to rank it "
               "for recall",
       .doc = "cold tier (`qevict-recall`): the digest kept in RAM per cold window, from which "
              "recall ranks it without reading it (docs/kv-cache.md, \"Cold tier and recall\")",
       .origin = "*choice* (Quest's bounds, InfLLM's representative key; with recall_rank=scan "
                 "the digests rank only decoding steps, so the cheapest that ranks them well: "
                 "chosen on the development seeds)",
       .our_choice = true,
       .choices = DigestChoices(),
       .eval_variant = true,
       .get = [](const KvConfig& c) { return KvValue(std::string(DigestKindName(c.cold_digest))); },
       .set =
           [](KvConfig& c, const KvValue& v) {
             c.cold_digest = ParseDigestKind(std::get<std::string>(v));
           }},
      {.key = "cold_digest_group",
       .type = T::kInt,
       .help = "cold tier: consecutive windows that share one digest (of their keys as one "
               "window), so the digests cost 1/G of their bytes a window; needs a digest whose "
               "size does not grow with the window (all but sign-sketch)",
       .origin = "*choice* (ours; InfLLM keeps a few representative keys per block of 128 "
                 "tokens, ArkVale a digest per page)",
       .our_choice = true,
       .min = 1,
       .max = 64,
       .request_max = 64,
       .eval_variant = true,
       .get = &GetField<&KvConfig::cold_digest_group>,
       .set = &SetField<&KvConfig::cold_digest_group>},
      {.key = "recall_rank",
       .type = T::kChoice,
       .help = "cold tier: how a prompt ranks the cold windows: scan (every one read back and "
               "ranked by its exact attention) or digest (the digests shortlist "
               "recall_candidates of them to read back)",
       .origin = "*choice* (ours: Quest and ArkVale rank by the digest alone; a scan reads the "
                 "cold file once per prompt)",
       .our_choice = true,
       .choices = {"scan", "digest"},
       .eval_variant = true,
       .get = [](const KvConfig& c) { return KvValue(std::string(c.recall_scan ? "scan" : "digest")); },
       .set =
           [](KvConfig& c, const KvValue& v) {
             c.recall_scan = std::get<std::string>(v) == "scan";
           }},
      {.key = "recall_candidates",
       .type = T::kInt,
       .help = "cold tier: cold windows per layer the digests shortlist to read back and rank "
               "exactly: at each prompt with --kv-recall-rank digest, a quarter of them at "
               "each decoding step",
       .origin = "*choice* (ours: Quest and ArkVale rank by the digest alone)",
       .our_choice = true,
       .min = 0,
       .request_max = 4096,
       .eval_variant = true,
       .get = &GetField<&KvConfig::recall_candidates>,
       .set = &SetField<&KvConfig::recall_candidates>},
      {.key = "recall_prompt",
       .type = T::kInt,
       .help = "cold tier: cold windows per layer a later prompt (a question), or the last chunk "
               "of a prompt read under the budget, recalls into fp16 by its own queries before "
               "it attends, held until its end re-plans (0: none)",
       .origin = "*choice* (ours; Quest reads prompts with full attention)",
       .our_choice = true,
       .min = 0,
       .request_max = 4096,
       .eval_variant = true,
       .get = &GetField<&KvConfig::recall_prompt>,
       .set = &SetField<&KvConfig::recall_prompt>},
      {.key = "recall_shared",
       .type = T::kInt,
       .help = "cold tier: windows every layer keeps in fp16 (recalled where cold) by the "
               "layers' mean recall score at each prompt end",
       .origin = "*choice* (ours; OmniKV and GemFilter share one selection across layers)",
       .our_choice = true,
       .min = 0,
       .request_max = 4096,
       .eval_variant = true,
       .get = &GetField<&KvConfig::recall_shared>,
       .set = &SetField<&KvConfig::recall_shared>},
      {.key = "cold_prefetch",
       .type = T::kChoice,
       .help = "cold tier: next-layer (while a prompt batch ranks one layer's cold windows, the "
               "kernel is asked to read the next layer's into the page cache) or off (the "
               "default: no gain measured on a fast disk with 2 cores)",
       .origin = "*choice* (the issue's overlap of reads with compute; ShadowKV and InfiniGen "
                 "prefetch the next layer's KV while this one computes)",
       .our_choice = true,
       .choices = {"off", "next-layer"},
       .eval_variant = true,
       .get = [](const KvConfig& c) {
         return KvValue(std::string(c.cold_prefetch ? "next-layer" : "off"));
       },
       .set =
           [](KvConfig& c, const KvValue& v) {
             c.cold_prefetch = std::get<std::string>(v) == "next-layer";
           }},
      {.key = "cold_disk_limit",
       .type = T::kBytes,
       .help = "cold tier: the most bytes its file may hold on disk (-1: the disk's own limit)",
       .doc = "cold tier: the most bytes its file may hold on disk; a window that would pass it "
              "is an error naming the limit (default: the disk's own)",
       .origin = "*choice*",
       .our_choice = true,
       .min = 1,
       .range_note = " (a positive number of bytes)",
       .request = false,  // the server's own --kv-cold-disk-limit caps what a session writes
       .get = &GetField<&KvConfig::cold_disk_limit>,
       .set = &SetField<&KvConfig::cold_disk_limit>,
       .default_doc = "none"},
  };
  return options;
}

struct Registry {
  std::vector<std::unique_ptr<KvOptionDef>> policy_options;
  std::vector<std::pair<int, std::string>> policy_names;  // (order, name)
  bool frozen = false;  // the lists were read: a registration now would come too late
};

Registry& GetRegistry() {
  static Registry registry;
  return registry;
}

[[noreturn]] void Abort(const std::string& message) {
  std::fprintf(stderr, "qevict: %s\n", message.c_str());
  std::abort();
}

std::string Number(double v, KvOptionType type) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  if (type != KvOptionType::kNumber) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    return buf;
  }
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

}  // namespace

const KvOptionDef& RegisterKvOption(KvOptionDef def) {
  if (def.get != nullptr || (def.type != KvOptionType::kInt && def.type != KvOptionType::kNumber)) {
    Abort("policy option '" + std::string(def.key) + "' must be an int or a number");
  }
  for (const KvOptionDef& c : CacheOptions()) {
    if (c.key == def.key) Abort("kv option '" + std::string(def.key) + "' declared twice");
  }
  for (const auto& p : GetRegistry().policy_options) {
    if (p->key == def.key) Abort("kv option '" + std::string(def.key) + "' declared twice");
  }
  if (GetRegistry().frozen) Abort("kv option '" + std::string(def.key) + "' registered too late");
  GetRegistry().policy_options.push_back(std::make_unique<KvOptionDef>(std::move(def)));
  return *GetRegistry().policy_options.back();
}

const std::vector<const KvOptionDef*>& KvOptions() {
  // Policy options register during static initialization, before main: the list is built at
  // the first call after it and is fixed from then on (a registration after it would abort).
  static const std::vector<const KvOptionDef*> all = [] {
    GetRegistry().frozen = true;
    std::vector<const KvOptionDef*> out;
    for (const KvOptionDef& c : CacheOptions()) out.push_back(&c);
    std::vector<const KvOptionDef*> policy;
    for (const auto& p : GetRegistry().policy_options) policy.push_back(p.get());
    std::sort(policy.begin(), policy.end(),
              [](const KvOptionDef* a, const KvOptionDef* b) { return a->key < b->key; });
    out.insert(out.end(), policy.begin(), policy.end());
    return out;
  }();
  return all;
}

const KvOptionDef* FindKvOption(std::string_view key) {
  for (const KvOptionDef* def : KvOptions()) {
    if (def->key == key) return def;
  }
  return nullptr;
}

std::string KvOptionFlag(const KvOptionDef& def) {
  if (!def.flag.empty()) return std::string(def.flag);
  std::string flag = "--kv-" + std::string(def.key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

KvValue KvOptionValue(const KvConfig& config, const KvOptionDef& def) {
  if (def.get != nullptr) return def.get(config);
  return config.option(def.key);
}

KvValue KvOptionDefault(const KvOptionDef& def) {
  if (def.get != nullptr) return def.get(KvConfig{});
  return def.default_number;
}

void SetKvOption(KvConfig& config, const KvOptionDef& def, const KvValue& value) {
  if (def.set != nullptr) {
    def.set(config, value);
  } else {
    config.policy_options[std::string(def.key)] = std::get<double>(value);
  }
}

KvValue ParseKvOptionText(const KvOptionDef& def, std::string_view text, const std::string& what) {
  const std::string quoted = "'" + std::string(text) + "'";
  switch (def.type) {
    case KvOptionType::kText:
      return std::string(text);
    case KvOptionType::kChoice:
      if (std::find(def.choices.begin(), def.choices.end(), text) == def.choices.end()) {
        throw Error(what + " must be " + KvOptionRangeText(def) + ", got " + quoted);
      }
      return std::string(text);
    case KvOptionType::kNumber: {
      double v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
        throw Error(what + ": " + quoted + " is not a number");
      }
      return v;
    }
    case KvOptionType::kInt:
    case KvOptionType::kBytes: {
      long long v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      std::string_view rest(end, text.data() + text.size() - end);
      long long scale = 1;
      if (def.type == KvOptionType::kBytes && rest.size() == 1) {
        const char s = static_cast<char>(std::tolower(static_cast<unsigned char>(rest[0])));
        scale = s == 'k' ? 1LL << 10 : s == 'm' ? 1LL << 20 : s == 'g' ? 1LL << 30 : 0;
        if (scale != 0) rest = {};
      }
      if (text.empty() || ec != std::errc() || !rest.empty() || scale == 0) {
        throw Error(
            what + ": " + quoted + " is not an integer" +
            (def.type == KvOptionType::kBytes ? " (a size suffix k, m or g is allowed)" : ""));
      }
      return static_cast<double>(v) * static_cast<double>(scale);
    }
  }
  return std::string(text);
}

std::string KvValueText(const KvOptionDef& def, const KvValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  return Number(std::get<double>(value), def.type);
}

std::string KvOptionRangeText(const KvOptionDef& def) {
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
    }
    return out;
  };
  if (def.type == KvOptionType::kChoice) {
    std::vector<std::string> items;
    for (std::string_view c : def.choices) items.push_back("'" + std::string(c) + "'");
    return join(items);
  }
  if (def.type == KvOptionType::kText) return "a directory";
  if (!def.one_of.empty()) {
    std::vector<std::string> items;
    for (double v : def.one_of) items.push_back(Number(v, def.type));
    return join(items);
  }
  std::string range;
  const bool has_min = std::isfinite(def.min), has_max = std::isfinite(def.max);
  if (has_min && has_max) {
    range = std::string("in ") + (def.min_open ? "(" : "[") + Number(def.min, def.type) + ", " +
            Number(def.max, def.type) + "]";
  } else if (has_min) {
    range = (def.min_open ? "> " : ">= ") + Number(def.min, def.type);
  } else if (has_max) {
    range = "<= " + Number(def.max, def.type);
  }
  return def.odd ? "odd and " + range : range;
}

bool KvValueInRange(const KvOptionDef& def, const KvValue& value) {
  if (def.type == KvOptionType::kText) return std::holds_alternative<std::string>(value);
  if (def.type == KvOptionType::kChoice) {
    const auto* s = std::get_if<std::string>(&value);
    return s != nullptr &&
           std::find(def.choices.begin(), def.choices.end(), *s) != def.choices.end();
  }
  const auto* p = std::get_if<double>(&value);
  if (p == nullptr || !std::isfinite(*p)) return false;
  const double v = *p;
  if (def.type == KvOptionType::kBytes && v == -1) return true;  // -1: no byte cap
  if (def.type != KvOptionType::kNumber && v != std::floor(v)) return false;
  if (!def.one_of.empty()) {
    return std::find(def.one_of.begin(), def.one_of.end(), v) != def.one_of.end();
  }
  if (def.min_open ? !(v > def.min) : !(v >= def.min)) return false;
  if (!(v <= def.max)) return false;
  return !def.odd || std::fmod(v, 2.0) == 1.0;
}

double KvConfig::option(std::string_view key) const {
  const KvOptionDef* def = FindKvOption(key);
  if (def == nullptr || def->get != nullptr) {
    throw Error("no policy option '" + std::string(key) + "' is registered");
  }
  const auto it = policy_options.find(key);
  return it != policy_options.end() ? it->second : def->default_number;
}

void KvConfig::set_option(std::string_view key, double value) {
  const KvOptionDef* def = FindKvOption(key);
  if (def == nullptr || def->get != nullptr) {
    throw Error("no policy option '" + std::string(key) + "' is registered");
  }
  policy_options[std::string(key)] = value;
}

void RegisterKvPolicyName(std::string_view name, int order) {
  for (const auto& [o, n] : GetRegistry().policy_names) {
    if (n == name || o == order) {
      Abort("kv policy '" + std::string(name) + "' (order " + std::to_string(order) +
            ") clashes with '" + n + "' (order " + std::to_string(o) + ")");
    }
  }
  if (GetRegistry().frozen) Abort("kv policy '" + std::string(name) + "' registered too late");
  GetRegistry().policy_names.emplace_back(order, std::string(name));
}

const std::vector<std::string_view>& KnownKvPolicyNames() {
  static const std::vector<std::string_view> names = [] {
    Registry& registry = GetRegistry();
    registry.frozen = true;  // the views below point into the registry's strings
    std::sort(registry.policy_names.begin(), registry.policy_names.end());
    std::vector<std::string_view> out;
    for (const auto& [order, name] : registry.policy_names) out.emplace_back(name);
    return out;
  }();
  return names;
}

std::string KvConfigKey(const KvConfig& c) {
  std::string key = c.policy;
  for (const KvOptionDef* def : KvOptions()) {
    const KvValue v = KvOptionValue(c, *def);
    key += '|';
    key += def->key;
    key += '=';
    if (const auto* d = std::get_if<double>(&v)) {
      std::ostringstream number;  // exact: distinct doubles give distinct keys
      number.precision(17);
      number << *d;
      key += number.str();
    } else {
      key += std::get<std::string>(v);
    }
  }
  return key;
}

const std::vector<KvOptionDoc>& KvOptionDocs() {
  static const std::vector<KvOptionDoc> docs = [] {
    std::vector<KvOptionDoc> out;
    std::string names;
    for (std::string_view n : KnownKvPolicyNames()) names += " " + std::string(n);
    out.push_back({"--kv-policy", "qevict", "cache policy:" + names, false});
    for (const KvOptionDef* def : KvOptions()) {
      out.push_back({KvOptionFlag(*def),
                     def->default_doc.empty() ? KvValueText(*def, KvOptionDefault(*def))
                                              : std::string(def->default_doc),
                     std::string(def->help), def->our_choice});
    }
    out.push_back({"--kv-stats", "off", "print cache statistics after a run", false});
    return out;
  }();
  return docs;
}

std::string KvOptionsMarkdown() {
  auto cell = [](std::string text) {
    std::string out;
    for (char ch : text) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return out;
  };
  std::string md =
      "| flag | default | meaning | whose default | server `kv` key / `eval` variant |\n"
      "|---|---|---|---|---|\n"
      "| `--kv-policy` | `full` | policy name (`PolicyNames()`); `qevict` is the spec's method; "
      "`recall-oracle` is a diagnostic, not for use. "
      "The command line and the server compress only when asked (`KvConfig`'s own field "
      "defaults to `qevict`, which with budget 1.0 stores everything in fp16 as well) | ours | "
      "`policy`; `eval --policies NAME` |\n";
  for (const KvOptionDef* def : KvOptions()) {
    const std::string value = KvValueText(*def, KvOptionDefault(*def));
    std::string shown = !def->default_doc.empty()            ? std::string(def->default_doc)
                        : def->type == KvOptionType::kChoice ? "`" + value + "`"
                                                             : value;
    if (def->key == "budget") shown = "1.0";
    std::string meaning = def->doc.empty() ? std::string(def->help) : std::string(def->doc);
    if (def->type != KvOptionType::kText && def->type != KvOptionType::kChoice &&
        def->one_of.empty()) {
      meaning += "; " + KvOptionRangeText(*def);
    }
    std::string where = def->request ? "`" + std::string(def->key) + "`" : "—";
    if (def->eval_variant) where += "; variant `" + std::string(def->key) + "=`";
    md += "| `" + KvOptionFlag(*def) + "` | " + cell(shown) + " | " + cell(meaning) + " | " +
          cell(std::string(def->origin)) + " | " + where + " |\n";
    if (def->key == "budget") {
      md +=
          "| `--kv-ratio` | — | the share *removed*, kvpress's compression ratio: `--kv-ratio "
          "R` is `--kv-budget 1-R`; [0, 1) | kvpress's convention | `ratio` |\n";
    }
  }
  md +=
      "| `--kv-stats` | off | `run`, `chat`, `bench`: a summary on stderr at the end (budget, "
      "resident, reserved, saved vs full in MiB and %, tiers, promotions, RSS; a peak over the "
      "budget flagged); `--json` adds the raw `KvStats` as one JSON line (and implies "
      "`--kv-stats` in `run` and `chat`) | — | — |\n";
  return md;
}

}  // namespace qevict
