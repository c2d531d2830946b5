#include "eval/policy_variant.h"

#include <charconv>
#include <sstream>

#include "util/error.h"

namespace qevict {
namespace {

double ParseNumber(const std::string& spec, const std::string& key, const std::string& value) {
  double out = 0.0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size()) {
    throw Error("policy variant '" + spec + "': " + key + "=" + value + " is not a number");
  }
  return out;
}

}  // namespace

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
    if (key == "recovery") {
      c.recovery = ParseRecoveryFidelity(value);
    } else if (key == "route_every") {
      c.route_every = static_cast<int>(ParseNumber(spec, key, value));
    } else if (key == "q_share") {
      c.q_share = ParseNumber(spec, key, value);
    } else if (key == "prefill_q_share") {
      c.prefill_q_share = ParseNumber(spec, key, value);
    } else if (key == "hysteresis") {
      c.hysteresis = ParseNumber(spec, key, value);
    } else if (key == "h2o_recent_share") {
      c.h2o_recent_share = ParseNumber(spec, key, value);
    } else if (key == "query_kernel") {
      c.query_kernel = static_cast<int>(ParseNumber(spec, key, value));
    } else if (key == "snapkv_kernel") {
      c.snapkv_kernel = static_cast<int>(ParseNumber(spec, key, value));
    } else if (key == "score_source") {
      c.score_source = ParseScoreSource(value);
    } else if (key == "reconstruction_chunk") {
      c.reconstruction_chunk = static_cast<int>(ParseNumber(spec, key, value));
    } else if (key == "expected_future") {
      c.expected_future = static_cast<int>(ParseNumber(spec, key, value));
    } else if (key == "pyramid_beta") {
      c.pyramid_beta = ParseNumber(spec, key, value);
    } else {
      throw Error("policy variant '" + spec + "': unknown key '" + key +
                  "' (recovery, route_every, q_share, prefill_q_share, hysteresis, query_kernel, snapkv_kernel, "
                  "pyramid_beta, h2o_recent_share, score_source, reconstruction_chunk, expected_future)");
    }
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
