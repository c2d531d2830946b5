// Bounds-checked little-endian cursor over untrusted bytes, used by the GGUF parser. Every read
// is checked against the bytes that remain before anything is touched; a short read throws
// qevict::Error naming what was being read and the byte offset. Reads never assume alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace qevict::gguf::internal {

// Decoders for bytes the caller has already bounds-checked.
inline uint16_t LoadLe16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline uint64_t LoadLe64(const uint8_t* p) {
  return static_cast<uint64_t>(LoadLe32(p)) | (static_cast<uint64_t>(LoadLe32(p + 4)) << 32);
}

// Printable rendering of untrusted text for error messages: bytes outside printable ASCII become
// \xNN and long strings are cut (with "...") so a crafted name cannot flood a log line.
std::string Printable(std::string_view text, size_t max_chars = 80);

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  size_t size() const { return bytes_.size(); }
  std::span<const uint8_t> bytes() const { return bytes_; }
  const uint8_t* current() const { return bytes_.data() + pos_; }

  // Returns the next n bytes and advances past them; throws if fewer than n remain.
  const uint8_t* Take(uint64_t n, std::string_view what) {
    if (n > remaining()) ThrowPastEnd(n, what);
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  uint8_t U8(std::string_view what) { return *Take(1, what); }
  uint16_t U16(std::string_view what) { return LoadLe16(Take(2, what)); }
  uint32_t U32(std::string_view what) { return LoadLe32(Take(4, what)); }
  uint64_t U64(std::string_view what) { return LoadLe64(Take(8, what)); }

  // A GGUF string: uint64 length, then that many bytes (not NUL-terminated). The view points into
  // the underlying bytes. With max_bytes, a longer length is rejected before its bytes are read.
  std::string_view String(std::string_view what, uint64_t max_bytes = UINT64_MAX);

 private:
  [[noreturn]] void ThrowPastEnd(uint64_t n, std::string_view what) const;

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace qevict::gguf::internal
