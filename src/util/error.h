// Errors a user can act on (bad file, bad flag, bad request) are thrown as qevict::Error and
// caught at the boundary (CLI main, server handler, fuzz target). Internal invariants use
// QEVICT_CHECK, which stays on in release builds and aborts with a message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace qevict {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] inline void CheckFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "qevict: internal check failed: %s (%s:%d)\n", expr, file, line);
  std::abort();
}

}  // namespace qevict

#define QEVICT_CHECK(cond)                                          \
  do {                                                              \
    if (!(cond)) ::qevict::CheckFailed(#cond, __FILE__, __LINE__); \
  } while (0)
