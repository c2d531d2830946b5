// What every fuzz target shares: the registry of entry points and the invariant check.
//
// An entry point takes one input and drives one code path of the engine with it. Malformed input
// must end in a qevict::Error, which the entry point catches. Everything else is a finding:
// a sanitizer report, a crash, a hang, an over-large allocation, or any other exception escaping
// (an InvariantViolation when the code returned something it promises never to return).
//
// The same entry points run under libFuzzer (fuzz/fuzz_main.cc, one executable per target) and
// in the regression test that replays kept inputs (tests/fuzz_regression_test.cc), so a kept
// crash input exercises exactly the code it crashed in. Everything here is header-only so the
// test executable, built without libFuzzer, can include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace qevict::fuzz {

using FuzzFunction = int (*)(const uint8_t* data, size_t size);

// Deliberately not a qevict::Error: the entry points let it escape.
class InvariantViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

inline void Require(bool condition, const std::string& what) {
  if (!condition) throw InvariantViolation("fuzz invariant violated: " + what);
}

// Target name (the directory name under fuzz/corpus/ and tests/fuzz_regressions/) -> entry.
inline std::map<std::string, FuzzFunction>& FuzzTargets() {
  static std::map<std::string, FuzzFunction> targets;
  return targets;
}

// Used as `inline const bool kRegistered = RegisterFuzzTarget("name", &Entry);` in the header
// that defines the target.
inline bool RegisterFuzzTarget(const char* name, FuzzFunction entry) {
  FuzzTargets().emplace(name, entry);
  return true;
}

}  // namespace qevict::fuzz
