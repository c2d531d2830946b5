// Every KV option as data. One descriptor (KvOptionDef) per option says its key, type, default,
// range, help text and where it may be given; the command line's --kv-* flags
// (tools/kv_flags.cc), the server's `kv` object (server/kv_overrides.cc), the evaluator's
// `--policies name:key=value` variants (eval/policy_variant.cc), KvConfig::Validate(),
// KvConfigKey(), KvOptionDocs() and the options table of docs/kv-cache.md are all generated from
// these descriptors, so that an option is declared in exactly one place.
//
// Two kinds of option:
//   - the cache's own options (budget, window, bits, ...), read by the tiered cache itself: a
//     field of KvConfig each, declared once in kv_options.cc (`get`/`set` bind the field);
//   - a policy's options (h2o_recent_share, pyramid_beta, ...): declared in the policy's own file
//     with RegisterKvOption and stored by key in KvConfig::policy_options (numbers only); the
//     policy reads them with KvPolicyOption::Get / KvConfig::option(key).
// Policies register their names here too (RegisterKvPolicyName, via policy/registry.h's
// PolicyRegistration), so that KvConfig can validate a name without a list of its own.
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kv/kv_config.h"

namespace qevict {

enum class KvOptionType {
  kInt,     // an integer
  kNumber,  // a real number
  kBytes,   // a byte count; the command line and variants take size suffixes (512k, 64m, 1g)
  kChoice,  // one of `choices`
  kText,    // free text (a directory)
};

// A number (kInt, kNumber, kBytes) or a string (kChoice, kText).
using KvValue = std::variant<double, std::string>;

// Designated initializers must follow this declaration order.
struct KvOptionDef {
  std::string_view key;  // KvConfig's name: the server's kv key and the eval variant key
  KvOptionType type = KvOptionType::kNumber;
  std::string_view help;             // one line, for --help and KvOptionDocs()
  std::string_view policies{};       // the policies that read it ("" : the cache itself)
  std::string_view flag{};           // the CLI flag when not "--kv-" + key with '-' for '_'
  std::string_view doc{};            // the docs table's meaning when longer than `help`
  std::string_view origin = "spec";  // the docs table's "whose default" column
  bool our_choice = false;           // the default is ours: the spec leaves it open
  // Range of a number (kInt, kNumber, kBytes): [min, max], min excluded when min_open; odd
  // integers only when odd; exactly one of one_of when it is not empty.
  double min = -HUGE_VAL;
  double max = HUGE_VAL;
  bool min_open = false;
  bool odd = false;
  std::vector<double> one_of{};
  std::string_view range_note{};  // said after the range in the error, e.g. what 0 means
  // A request to the server may not exceed this (its cost is the server's): tighter than max.
  double request_max = HUGE_VAL;
  std::vector<std::string_view> choices{};  // kChoice
  bool eval_variant = false;  // may differ between the rows of one evaluation (forks of a prefix)
  bool request = true;        // the server's kv object takes it
  // The cache's options: the KvConfig field. Policy options leave these null and give
  // default_number; their value lives in KvConfig::policy_options.
  KvValue (*get)(const KvConfig&) = nullptr;
  void (*set)(KvConfig&, const KvValue&) = nullptr;
  double default_number = 0.0;
  std::string_view default_doc{};  // the docs' default when not the value's text
};

// Registers a policy's option (static initialization, in the policy's file). Aborts on a key
// registered twice or a policy option that is not a number.
const KvOptionDef& RegisterKvOption(KvOptionDef def);

// Every option: the cache's in declaration order (kv_options.cc), then the policies' by key.
const std::vector<const KvOptionDef*>& KvOptions();
const KvOptionDef* FindKvOption(std::string_view key);  // nullptr when unknown
std::string KvOptionFlag(const KvOptionDef& def);       // "--kv-route-every"

KvValue KvOptionValue(const KvConfig& config, const KvOptionDef& def);
KvValue KvOptionDefault(const KvOptionDef& def);
// Sets the value without checking its range (Validate() does; so do the surfaces).
void SetKvOption(KvConfig& config, const KvOptionDef& def, const KvValue& value);
// Text as the command line and variants give it; throws Error starting with `what`.
KvValue ParseKvOptionText(const KvOptionDef& def, std::string_view text, const std::string& what);
std::string KvValueText(const KvOptionDef& def, const KvValue& value);
// "in [1, 1024]", "2, 4 or 8", "odd and >= 1", "'paper' or 'exact'".
std::string KvOptionRangeText(const KvOptionDef& def);
// Whether value lies in the option's range (a kChoice value among its choices).
bool KvValueInRange(const KvOptionDef& def, const KvValue& value);

// A policy's option, declared at namespace scope in its file:
//   const KvPolicyOption kRecentShare({.key = "h2o_recent_share", ...});
// and read in the policy's factory: kRecentShare.Get(config).
class KvPolicyOption {
 public:
  explicit KvPolicyOption(KvOptionDef def) : def_(&RegisterKvOption(std::move(def))) {}
  double Get(const KvConfig& config) const { return config.option(def_->key); }
  int GetInt(const KvConfig& config) const { return static_cast<int>(Get(config)); }
  const KvOptionDef& def() const { return *def_; }

 private:
  const KvOptionDef* def_;
};

// Policy names (KnownKvPolicyNames() in kv_config.h) come from here, ordered by `order`.
void RegisterKvPolicyName(std::string_view name, int order);

// The docs/kv-cache.md options table (between its kv-options markers), generated.
std::string KvOptionsMarkdown();

}  // namespace qevict
