// Little-endian binary writing and bounds-checked reading, for state saved to disk (the prompt
// cache, engine/prompt_cache.h). The reader never reads past its bytes: a short or malformed
// input throws qevict::Error naming what was being read, so a corrupt file is refused cleanly.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "util/error.h"

namespace qevict {

class ByteWriter {
 public:
  template <class T>
  void Pod(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    Raw(&value, sizeof(T));
  }
  void Raw(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  void String(const std::string& s) {
    Pod<uint64_t>(s.size());
    Raw(s.data(), s.size());
  }
  // A length-prefixed array of trivially copyable elements.
  template <class T>
  void Array(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    Pod<uint64_t>(values.size());
    Raw(values.data(), values.size_bytes());
  }

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  // what: how errors name the input (e.g. "prompt cache /tmp/doc.qpc").
  ByteReader(std::span<const uint8_t> bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}

  template <class T>
  T Pod(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    Raw(&value, sizeof(T), field);
    return value;
  }
  void Raw(void* out, size_t n, const char* field) {
    Need(n, field);
    if (n == 0) return;  // out may be an empty vector's null data()
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }
  std::string String(const char* field, size_t max_size) {
    const uint64_t n = Count(field, max_size);
    std::string s(n, '\0');
    Raw(s.data(), n, field);
    return s;
  }
  // A length-prefixed array written by ByteWriter::Array, of at most max_size elements.
  template <class T>
  std::vector<T> Array(const char* field, size_t max_size) {
    const uint64_t n = Count(field, max_size);
    Need(n * sizeof(T), field);
    std::vector<T> values(n);
    Raw(values.data(), n * sizeof(T), field);
    return values;
  }
  // A length-prefixed array that must hold exactly `size` elements, read into out.
  template <class T>
  void ArrayInto(const char* field, std::span<T> out) {
    const uint64_t n = Pod<uint64_t>(field);
    if (n != out.size()) {
      Fail(std::string(field) + " holds " + std::to_string(n) + " values, " +
           std::to_string(out.size()) + " expected");
    }
    Raw(out.data(), out.size_bytes(), field);
  }
  // A bool written as one byte; anything but 0 or 1 is refused.
  bool Bool(const char* field) {
    const uint8_t b = Pod<uint8_t>(field);
    if (b > 1) Fail(std::string(field) + " is not a boolean");
    return b == 1;
  }

  size_t remaining() const { return bytes_.size() - at_; }
  size_t offset() const { return at_; }
  // Throws the reader's Error: "<what>: <message>".
  [[noreturn]] void Fail(const std::string& message) const { throw Error(what_ + ": " + message); }

 private:
  uint64_t Count(const char* field, size_t max_size) {
    const uint64_t n = Pod<uint64_t>(field);
    if (n > max_size) {
      Fail(std::string(field) + " claims " + std::to_string(n) + " elements (at most " +
           std::to_string(max_size) + ")");
    }
    return n;
  }
  void Need(size_t n, const char* field) const {
    if (n > remaining()) {
      Fail("truncated while reading " + std::string(field) + " (" + std::to_string(n) +
           " bytes needed, " + std::to_string(remaining()) + " left)");
    }
  }

  std::span<const uint8_t> bytes_;
  std::string what_;
  size_t at_ = 0;
};

}  // namespace qevict
