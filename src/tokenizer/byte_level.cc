#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/unicode.h"

namespace qevict::byte_level {
namespace {

bool IsPrintableByte(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> byte_to_cp;
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 512> cp_to_byte;  // every mapped code point is < 0x200; -1 when none

  Tables() {
    cp_to_byte.fill(-1);
    char32_t next_unprintable = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = IsPrintableByte(b) ? static_cast<char32_t>(b) : next_unprintable++;
      byte_to_cp[b] = cp;
      unicode::AppendUtf8(cp, &byte_to_utf8[b]);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

char32_t ByteToCodePoint(unsigned char b) { return GetTables().byte_to_cp[b]; }

std::optional<unsigned char> CodePointToByte(char32_t cp) {
  if (cp >= 512) return std::nullopt;
  const int16_t b = GetTables().cp_to_byte[cp];
  if (b < 0) return std::nullopt;
  return static_cast<unsigned char>(b);
}

std::string Encode(std::string_view bytes) {
  const Tables& tables = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += tables.byte_to_utf8[b];
  return out;
}

std::string Decode(std::string_view mapped) {
  std::string out;
  out.reserve(mapped.size());
  for (size_t pos = 0; pos < mapped.size();) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(mapped, pos);
    const std::optional<unsigned char> b = CodePointToByte(c.cp);  // none for invalid UTF-8
    if (b) {
      out.push_back(static_cast<char>(*b));
    } else {
      out.append(mapped.substr(pos, c.length));
    }
    pos += c.length;
  }
  return out;
}

}  // namespace qevict::byte_level
