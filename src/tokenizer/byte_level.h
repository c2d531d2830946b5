// GPT-2's reversible byte <-> unicode mapping used by byte-level BPE vocabularies: printable
// bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map to the code point of the same value, the other 68
// bytes to U+0100, U+0101, ... in byte order (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace qevict::byte_level {

// The code point standing for byte b.
char32_t ByteToCodePoint(unsigned char b);
// The byte a code point stands for, or nullopt if it stands for none.
std::optional<unsigned char> CodePointToByte(char32_t cp);

// Each byte of `bytes` replaced by the UTF-8 of its code point.
std::string Encode(std::string_view bytes);
// The inverse of Encode. Characters that stand for no byte are copied unchanged, so token
// texts outside the mapping (e.g. added tokens stored verbatim) still decode to themselves.
std::string Decode(std::string_view mapped);

}  // namespace qevict::byte_level
