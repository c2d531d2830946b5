#include "kv/cold_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace qevict {

ColdStore::ColdStore(const std::string& dir, int64_t slot_bytes, int64_t max_slots)
    : slot_bytes_(slot_bytes), max_slots_(max_slots) {
  QEVICT_CHECK(slot_bytes > 0 && max_slots > 0 && max_slots < (int64_t{1} << 31));
  std::string directory = dir;
  if (directory.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    directory = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string pattern = directory + "/qevict-cold-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = mkstemp(name.data());
  if (fd_ < 0) {
    throw Error("exact recovery: cannot create a cold-store file in '" + directory +
                "': " + std::strerror(errno) + " (set the cold-store directory or use "
                "--kv-recovery paper)");
  }
  path_ = name.data();
  unlink(path_.c_str());
  mapped_bytes_ = slot_bytes * max_slots;
  if (ftruncate(fd_, mapped_bytes_) != 0) {
    const int err = errno;
    close(fd_);
    throw Error("exact recovery: cannot size the cold-store file " + path_ + ": " +
                std::strerror(err));
  }
  void* base = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd_);
    throw Error("exact recovery: cannot map the cold-store file " + path_ + ": " +
                std::strerror(err));
  }
  base_ = static_cast<uint8_t*>(base);
}

ColdStore::~ColdStore() {
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
  if (fd_ >= 0) close(fd_);
}

int32_t ColdStore::Allocate() {
  int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (next_unused_ >= max_slots_) throw Error("exact recovery: the cold store is full");
    slot = next_unused_++;
  }
  ++live_slots_;
  peak_slots_ = std::max(peak_slots_, live_slots_);
  return slot;
}

void ColdStore::Free(int32_t slot) {
  QEVICT_CHECK(slot >= 0 && slot < next_unused_);
  free_slots_.push_back(slot);
  --live_slots_;
}

void ColdStore::Reset() {
  // Give the pages back: the next run starts from an empty (sparse) file.
  if (next_unused_ > 0) {
    madvise(base_, static_cast<size_t>(next_unused_) * slot_bytes_, MADV_REMOVE);
  }
  free_slots_.clear();
  next_unused_ = 0;
  live_slots_ = 0;
  peak_slots_ = 0;
}

}  // namespace qevict
