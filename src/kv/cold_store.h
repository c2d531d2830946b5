// Exact-recovery cold store (docs/kv-cache.md, "Recovery fidelity"): fp16 originals of demoted
// windows in a memory-mapped file outside the hot budget. The file is created in a directory of the
// user's choice, unlinked at once (nothing is left behind, even after a crash), sized sparsely for
// the worst case and mapped once; only written slots occupy disk or page cache. Freed slots are
// reused. live_bytes() is reported as KvStats::cold_bytes and never counted as free memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qevict {

class ColdStore {
 public:
  // Room for max_slots slots of slot_bytes each. dir "" means $TMPDIR, else /tmp.
  ColdStore(const std::string& dir, int64_t slot_bytes, int64_t max_slots);
  ~ColdStore();
  ColdStore(const ColdStore&) = delete;
  ColdStore& operator=(const ColdStore&) = delete;

  int32_t Allocate();  // a free slot (throws qevict::Error when full)
  void Free(int32_t slot);
  uint8_t* data(int32_t slot) const { return base_ + static_cast<int64_t>(slot) * slot_bytes_; }
  void Reset();  // frees every slot

  int64_t live_bytes() const { return live_slots_ * slot_bytes_; }
  int64_t peak_bytes() const { return peak_slots_ * slot_bytes_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  int64_t slot_bytes_;
  int64_t max_slots_;
  int64_t mapped_bytes_ = 0;
  std::vector<int32_t> free_slots_;
  int32_t next_unused_ = 0;  // slots >= this were never handed out
  int64_t live_slots_ = 0;
  int64_t peak_slots_ = 0;
};

}  // namespace qevict
