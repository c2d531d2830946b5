#include "eval/policy_variant.h"

#include <sstream>

#include "kv/kv_options.h"
#include "util/error.h"

namespace qevict {

std::string PolicyVariantKeys() {
  std::string keys;
  for (const KvOptionDef* def : KvOptions()) {
    if (def->eval_variant) keys += (keys.empty() ? "" : ", ") + std::string(def->key);
  }
  return keys;
}

KvConfig ApplyPolicyVariant(const KvConfig& base, const std::string& spec) {
  KvConfig c = base;
  std::stringstream ss(spec);
  std::string part;
  std::getline(ss, part, ':');
  c.policy = part;
  while (std::getline(ss, part, ':')) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error("policy variant '" + spec + "': expected key=value, got '" + part + "'");
    }
    const std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    const KvOptionDef* def = FindKvOption(key);
    if (def != nullptr && (def->key == "budget" || def->key == "budget_bytes")) {
      throw Error("policy variant '" + spec + "': the budget is not a variant key; every " +
                  "policy runs at each of --budgets");
    }
    if (def == nullptr || !def->eval_variant) {
      throw Error("policy variant '" + spec + "': " +
                  (def == nullptr ? "unknown key '" + key + "'"
                                  : "'" + key +
                                        "' shapes the prefix every row forks from, so it "
                                        "is set for the whole evaluation (" +
                                        KvOptionFlag(*def) + "), not per variant") +
                  " (variant keys: " + PolicyVariantKeys() + ")");
    }
    SetKvOption(c, *def, ParseKvOptionText(*def, value, "policy variant '" + spec + "': " + key));
  }
  try {
    c.Validate();
  } catch (const Error& e) {
    // KvConfig speaks in --kv-* flags; here the policy came from --policies or a variant.
    throw Error("--policies entry '" + spec + "': " + e.what());
  }
  return c;
}

}  // namespace qevict
