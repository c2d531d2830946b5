// Splits one fuzz input into the pieces a target needs, consuming it front to back. Reads past
// the end yield zeros / empty pieces, so every input maps to some call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace qevict::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}

  bool empty() const { return rest_.empty(); }
  size_t size() const { return rest_.size(); }

  uint8_t Byte() {
    if (rest_.empty()) return 0;
    const auto b = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return b;
  }

  // Little-endian unsigned integer of `bytes` (1 to 8) bytes.
  uint64_t Uint(int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(Byte()) << (8 * i);
    return value;
  }

  // Up to (not including) the next `separator`, which is consumed; all the rest when none.
  std::string_view Until(char separator) {
    const size_t at = rest_.find(separator);
    const std::string_view piece = rest_.substr(0, at);
    rest_.remove_prefix(at == std::string_view::npos ? rest_.size() : at + 1);
    return piece;
  }

  std::string_view Rest() {
    const std::string_view piece = rest_;
    rest_ = {};
    return piece;
  }

 private:
  std::string_view rest_;
};

}  // namespace qevict::fuzz
