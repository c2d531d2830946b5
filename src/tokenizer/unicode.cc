#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace qevict::unicode {
namespace {

struct ClassRange {
  char32_t first;
  char32_t last;
  CharClass cls;
};

constexpr ClassRange kClassRanges[] = {
#include "tokenizer/unicode_tables.inc"
};

std::array<CharClass, 128> MakeAsciiClasses() {
  std::array<CharClass, 128> classes{};
  for (const ClassRange& r : kClassRanges) {
    if (r.first >= 128) break;
    for (char32_t cp = r.first; cp <= r.last && cp < 128; ++cp) classes[cp] = r.cls;
  }
  return classes;
}

const std::array<CharClass, 128> kAsciiClasses = MakeAsciiClasses();

}  // namespace

CharClass ClassOf(char32_t cp) {
  if (cp < 128) return kAsciiClasses[cp];
  // First range whose last code point is >= cp.
  const ClassRange* it = std::lower_bound(
      std::begin(kClassRanges), std::end(kClassRanges), cp,
      [](const ClassRange& r, char32_t value) { return r.last < value; });
  if (it != std::end(kClassRanges) && it->first <= cp) return it->cls;
  return CharClass::kOther;
}

DecodedChar DecodeUtf8(std::string_view text, size_t pos) {
  constexpr DecodedChar kInvalid{0xFFFD, 1};
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  if (lead < 0x80) return {lead, 1};
  int length;
  char32_t cp;
  char32_t min_cp;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, cp = lead & 0x1F, min_cp = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, cp = lead & 0x0F, min_cp = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, cp = lead & 0x07, min_cp = 0x10000;
  } else {
    return kInvalid;
  }
  if (pos + length > text.size()) return kInvalid;
  for (int i = 1; i < length; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return kInvalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalid;
  return {cp, static_cast<uint8_t>(length)};
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsPythonSpace(char32_t cp) {
  // Python's str.isspace(): bidirectional class WS, B or S, or general category Zs.
  if (cp <= 0x20) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace qevict::unicode
