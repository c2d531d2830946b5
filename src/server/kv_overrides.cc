#include "server/kv_overrides.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "server/json_fields.h"
#include "util/error.h"

namespace qevict::server {
namespace {

using Setter =
    std::function<void(const nlohmann::json& value, const std::string& param, KvConfig& config)>;

std::string PolicyList() {
  std::string joined;
  for (std::string_view name : KnownKvPolicyNames()) {
    joined += (joined.empty() ? "" : ", ") + std::string(name);
  }
  return joined;
}

const std::map<std::string, Setter>& Setters() {
  static const std::map<std::string, Setter> setters = {
      {"policy",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.policy = GetString(v, p);
         const auto& names = KnownKvPolicyNames();
         if (std::find(names.begin(), names.end(), c.policy) == names.end()) {
           Reject("unknown kv policy '" + c.policy + "' (expected one of: " + PolicyList() + ")", p,
                  "unknown_policy");
         }
       }},
      {"budget",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.budget = GetNumber(v, p);
         if (!(c.budget > 0.0 && c.budget <= 1.0)) {
           Reject("'" + p +
                      "' must be in (0, 1] (a fraction of the fp16 cache of prompt + new "
                      "tokens), got " +
                      v.dump(),
                  p, "invalid_value");
         }
       }},
      {"ratio",  // kvpress's compression ratio: the share removed
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         const double ratio = GetNumber(v, p);
         if (!(ratio >= 0.0 && ratio < 1.0)) {
           Reject("'" + p + "' must be in [0, 1) (the share of the fp16 cache removed; "
                  "ratio R is budget 1-R), got " + v.dump(),
                  p, "invalid_value");
         }
         c.budget = 1.0 - ratio;
       }},
      {"budget_bytes",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.budget_bytes = GetIntegerIn(v, p, 1, int64_t{1} << 50);
       }},
      {"bits",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.bits = static_cast<int>(GetIntegerIn(v, p, 2, 8));
         if (c.bits != 2 && c.bits != 4 && c.bits != 8) {
           Reject("'" + p + "' must be 2, 4 or 8, got " + std::to_string(c.bits), p,
                  "invalid_value");
         }
       }},
      {"window", [](const nlohmann::json& v, const std::string& p,
                    KvConfig& c) { c.window = static_cast<int>(GetIntegerIn(v, p, 1, 1024)); }},
      {"sinks", [](const nlohmann::json& v, const std::string& p,
                   KvConfig& c) { c.sinks = static_cast<int>(GetIntegerIn(v, p, 0, 1024)); }},
      {"recent", [](const nlohmann::json& v, const std::string& p,
                    KvConfig& c) { c.recent = static_cast<int>(GetIntegerIn(v, p, 0, 1 << 20)); }},
      {"route_every",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.route_every = static_cast<int>(GetIntegerIn(v, p, 1, 1 << 20));
       }},
      {"q_share", [](const nlohmann::json& v, const std::string& p,
                     KvConfig& c) { c.q_share = GetNumberIn(v, p, 0.0, 1.0); }},
      {"prefill_q_share", [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.prefill_q_share = GetNumberIn(v, p, 0.0, 1.0);
       }},
      {"hysteresis", [](const nlohmann::json& v, const std::string& p,
                        KvConfig& c) { c.hysteresis = GetNumberIn(v, p, 0.0, 1.0e6); }},
      {"score",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         const std::string text = GetString(v, p);
         try {
           c.score = ParseScoreMode(text);
         } catch (const Error&) {
           Reject("'" + p + "' must be 'cumulative', 'decay' or 'normalized', got '" + text + "'",
                  p, "invalid_value");
         }
       }},
      {"score_decay", [](const nlohmann::json& v, const std::string& p,
                         KvConfig& c) { c.score_decay = GetNumberIn(v, p, 1e-9, 1.0); }},
      {"recovery",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         const std::string text = GetString(v, p);
         try {
           c.recovery = ParseRecoveryFidelity(text);
         } catch (const Error&) {
           Reject("'" + p + "' must be 'paper' or 'exact', got '" + text + "'", p, "invalid_value");
         }
       }},
      {"prefill_chunk",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.prefill_chunk = static_cast<int>(GetIntegerIn(v, p, 0, 4096));
       }},
      {"snapkv_window",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.snapkv_window = static_cast<int>(GetIntegerIn(v, p, 1, 4096));
       }},
      {"snapkv_kernel",
       [](const nlohmann::json& v, const std::string& p, KvConfig& c) {
         c.snapkv_kernel = static_cast<int>(GetIntegerIn(v, p, 1, 255));
         if (c.snapkv_kernel % 2 == 0) {
           Reject("'" + p + "' must be odd, got " + std::to_string(c.snapkv_kernel), p,
                  "invalid_value");
         }
       }},
      {"pyramid_beta", [](const nlohmann::json& v, const std::string& p,
                          KvConfig& c) { c.pyramid_beta = GetNumberIn(v, p, 1.0, 1.0e6); }},
  };
  return setters;
}

std::string KeyList() {
  std::string joined;
  for (const auto& [key, setter] : Setters()) joined += (joined.empty() ? "" : ", ") + key;
  return joined;
}

}  // namespace

KvConfig ApplyKvOverrides(const nlohmann::json& kv, const KvConfig& defaults) {
  if (!kv.is_object()) {
    Reject(std::string("'kv' must be an object, got ") + JsonTypeName(kv), "kv", "invalid_type");
  }
  KvConfig config = defaults;
  for (auto it = kv.begin(); it != kv.end(); ++it) {
    const std::string param = "kv." + it.key();
    auto setter = Setters().find(it.key());
    if (setter == Setters().end()) {
      Reject("unknown kv option '" + it.key() + "' (expected one of: " + KeyList() + ")", param,
             "unknown_parameter");
    }
    if (it->is_null()) continue;  // null: keep the server's default
    setter->second(*it, param, config);
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
