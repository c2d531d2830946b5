// A vocabulary's token texts in one buffer: id -> text as a string_view. As a
// std::vector<std::string> every token costs a 32-byte string header (and a heap block of its
// own past 15 bytes): 8 MiB of headers for Gemma 3's 262,144 tokens, where the texts themselves
// are about 2 MiB. Here each costs its bytes and a 4-byte end offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace qevict {

class TokenTexts {
 public:
  TokenTexts() = default;
  TokenTexts(std::initializer_list<std::string_view> texts) {
    for (std::string_view t : texts) push_back(t);
  }
  template <typename Range>
  static TokenTexts From(const Range& texts) {
    TokenTexts out;
    size_t bytes = 0;
    for (const auto& t : texts) bytes += std::string_view(t).size();
    out.reserve(std::size(texts), bytes);
    for (const auto& t : texts) out.push_back(t);
    return out;
  }

  void reserve(size_t count, size_t bytes) {
    ends_.reserve(count);
    bytes_.reserve(bytes);
  }
  // Throws std::length_error past 4 GiB of text (a vocabulary is far smaller; ValidateVocab's
  // caller limits the count).
  void push_back(std::string_view text) {
    if (bytes_.size() + text.size() > UINT32_MAX) throw std::length_error("token texts over 4 GiB");
    bytes_.append(text);
    ends_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  void clear() {
    bytes_.clear();
    ends_.clear();
  }

  size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }
  std::string_view operator[](size_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(bytes_).substr(begin, ends_[i] - begin);
  }
  // Bytes held (texts and offsets).
  size_t bytes() const { return bytes_.capacity() + ends_.capacity() * sizeof(uint32_t); }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string_view;
    const_iterator() = default;
    const_iterator(const TokenTexts* texts, size_t i) : texts_(texts), i_(i) {}
    std::string_view operator*() const { return (*texts_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }

   private:
    const TokenTexts* texts_ = nullptr;
    size_t i_ = 0;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

 private:
  std::string bytes_;           // every text, one after the other
  std::vector<uint32_t> ends_;  // where text i ends in bytes_
};

}  // namespace qevict
