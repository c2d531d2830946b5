// Read-only memory map of a whole file. Weights are used in place: resident memory for them is
// whatever pages the kernel brings in, never a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace qevict {

class MappedFile {
 public:
  // Throws qevict::Error with the path and the system's reason on failure.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace qevict
