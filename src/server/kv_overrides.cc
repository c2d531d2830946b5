#include "server/kv_overrides.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kv/kv_options.h"
#include "server/json_fields.h"
#include "util/error.h"

namespace qevict::server {
namespace {

std::string PolicyList() {
  std::string joined;
  for (std::string_view name : KnownKvPolicyNames()) {
    joined += (joined.empty() ? "" : ", ") + std::string(name);
  }
  return joined;
}

// Every key the object takes: policy, ratio, and each option descriptor a request may set
// (kv/kv_options.h: the cache's and every registered policy's), sorted.
const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out = {"policy", "ratio"};
    for (const KvOptionDef* def : KvOptions()) {
      if (def->request) out.emplace_back(def->key);
    }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return keys;
}

std::string KeyList() {
  std::string joined;
  for (const std::string& key : Keys()) joined += (joined.empty() ? "" : ", ") + key;
  return joined;
}

int64_t IntegerBound(double bound) {
  constexpr double kLimit = static_cast<double>(int64_t{1} << 53);
  return static_cast<int64_t>(std::clamp(bound, -kLimit, kLimit));
}

// One option from the request, typed and ranged by its descriptor.
void SetOption(const KvOptionDef& def, const nlohmann::json& v, const std::string& p, KvConfig& c) {
  const double hi = std::min(def.max, def.request_max);
  KvValue value;
  switch (def.type) {
    case KvOptionType::kInt:
    case KvOptionType::kBytes: {
      const double lo = def.min_open ? def.min + 1 : def.min;
      value = static_cast<double>(GetIntegerIn(v, p, IntegerBound(lo), IntegerBound(hi)));
      break;
    }
    case KvOptionType::kNumber:
      value = def.min_open ? GetNumber(v, p) : GetNumberIn(v, p, def.min, hi);
      if (def.min_open && !(std::get<double>(value) <= hi)) {
        Reject("'" + p + "' must be " + KvOptionRangeText(def) + ", got " + v.dump(), p,
               "invalid_value");
      }
      break;
    case KvOptionType::kChoice:
    case KvOptionType::kText:
      value = GetString(v, p);
      break;
  }
  if (!KvValueInRange(def, value)) {
    Reject("'" + p + "' must be " + KvOptionRangeText(def) + std::string(def.range_note) +
               ", got " + v.dump(),
           p, "invalid_value");
  }
  SetKvOption(c, def, value);
}

}  // namespace

KvConfig ApplyKvOverrides(const nlohmann::json& kv, const KvConfig& defaults) {
  if (!kv.is_object()) {
    Reject(std::string("'kv' must be an object, got ") + JsonTypeName(kv), "kv", "invalid_type");
  }
  KvConfig config = defaults;
  for (auto it = kv.begin(); it != kv.end(); ++it) {
    const std::string param = "kv." + it.key();
    const KvOptionDef* def = FindKvOption(it.key());
    if (std::find(Keys().begin(), Keys().end(), it.key()) == Keys().end()) {
      Reject("unknown kv option '" + it.key() + "' (expected one of: " + KeyList() + ")", param,
             "unknown_parameter");
    }
    if (it->is_null()) continue;  // null: keep the server's default
    if (it.key() == "policy") {
      config.policy = GetString(*it, param);
      const auto& names = KnownKvPolicyNames();
      if (std::find(names.begin(), names.end(), config.policy) == names.end()) {
        Reject("unknown kv policy '" + config.policy + "' (expected one of: " + PolicyList() + ")",
               param, "unknown_policy");
      }
    } else if (it.key() == "ratio") {  // kvpress's compression ratio: the share removed
      const double ratio = GetNumber(*it, param);
      if (!(ratio >= 0.0 && ratio < 1.0)) {
        Reject("'" + param +
                   "' must be in [0, 1) (the share of the fp16 cache removed; "
                   "ratio R is budget 1-R), got " +
                   it->dump(),
               param, "invalid_value");
      }
      config.budget = 1.0 - ratio;
    } else {
      SetOption(*def, *it, param, config);
    }
  }
  const bool gives_fraction = kv.contains("budget") && !kv["budget"].is_null();
  const bool gives_ratio = kv.contains("ratio") && !kv["ratio"].is_null();
  const bool gives_bytes = kv.contains("budget_bytes") && !kv["budget_bytes"].is_null();
  if (gives_fraction + gives_ratio + gives_bytes > 1) {
    Reject("give one of kv.budget, kv.ratio (= 1 - budget) or kv.budget_bytes", "kv.budget",
           "invalid_value");
  }
  const bool gives_budget = gives_fraction || gives_ratio;
  // A request's budget replaces the server's, whichever form the server's took.
  if (gives_budget) config.budget_bytes = -1;
  if (gives_bytes) config.budget = 1.0;
  if (config.policy == "full") {
    if (gives_budget || gives_bytes) {
      if (config.budget < 1.0 || config.budget_bytes > 0) {
        Reject(
            "kv policy 'full' keeps every token and cannot meet a budget; choose a "
            "compressing policy (e.g. \"qevict\") to use kv.budget / kv.budget_bytes",
            "kv.policy", "invalid_value");
      }
    } else {
      // {"policy": "full"} on a server whose default is a budgeted policy: no budget.
      config.budget = 1.0;
      config.budget_bytes = -1;
    }
  }
  try {
    config.Validate();
  } catch (const Error& e) {
    Reject(std::string("invalid kv settings: ") + e.what(), "kv", "invalid_value");
  }
  return config;
}

}  // namespace qevict::server
