#include "gguf/gguf_reader.h"

#include <algorithm>
#include <cstdio>

#include "util/error.h"

namespace qevict::gguf::internal {

std::string Printable(std::string_view text, size_t max_chars) {
  std::string out;
  out.reserve(std::min(text.size(), max_chars) + 3);
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  return out;
}

std::string_view ByteReader::String(std::string_view what, uint64_t max_bytes) {
  const size_t length_offset = pos_;
  const uint64_t length = U64(what);
  if (length > max_bytes) {
    throw Error(std::string(what) + " at byte offset " + std::to_string(length_offset) +
                " has length " + std::to_string(length) + ", over the limit of " +
                std::to_string(max_bytes) + " bytes");
  }
  if (length > remaining()) {
    throw Error(std::string(what) + ": string length " + std::to_string(length) +
                " at byte offset " + std::to_string(length_offset) + " exceeds the " +
                std::to_string(remaining()) + " bytes left in the file");
  }
  const uint8_t* p = Take(length, what);
  return {reinterpret_cast<const char*>(p), static_cast<size_t>(length)};
}

void ByteReader::ThrowPastEnd(uint64_t n, std::string_view what) const {
  throw Error("unexpected end of file reading " + std::string(what) + " at byte offset " +
              std::to_string(pos_) + ": needs " + std::to_string(n) + " bytes, only " +
              std::to_string(remaining()) + " left (file size " + std::to_string(size()) + ")");
}

}  // namespace qevict::gguf::internal
