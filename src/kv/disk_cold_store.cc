#include "kv/disk_cold_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#ifdef __linux__
#include <linux/falloc.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kv/crc32c.h"
#include "util/error.h"

namespace qevict {
namespace {

std::string DefaultDir(const std::string& dir) {
  if (!dir.empty()) return dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

// A size as a user gave it: bytes below 1 MiB (a limit of 1k is not "1 MiB"), else MiB.
std::string Size(int64_t bytes) {
  if (bytes < (1 << 20)) return std::to_string(bytes) + " bytes";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// The checksum of a slot's block: CRC-32C of the slot number (4 bytes, little-endian), the
// block's tag (8 bytes, little-endian: what the writer said the block is) and then the block, so
// a block found at another slot's place, or an earlier block of the slot where a write was lost,
// does not pass for the one asked for.
uint32_t SlotChecksum(int32_t slot, uint64_t tag, const uint8_t* block, int64_t block_bytes) {
  uint8_t header[12];
  for (int b = 0; b < 4; ++b) header[b] = static_cast<uint8_t>(static_cast<uint32_t>(slot) >> (8 * b));
  for (int b = 0; b < 8; ++b) header[4 + b] = static_cast<uint8_t>(tag >> (8 * b));
  return Crc32c(block, static_cast<size_t>(block_bytes), Crc32c(header, sizeof header));
}

uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

constexpr size_t kMaxRunSlots = 64;  // slots one preadv reads at most (ReadBlocks)

std::atomic<int64_t> g_process_live{0};    // bytes every store of the process holds on disk
std::atomic<int64_t> g_process_limit{-1};  // serve --kv-cold-disk-total
// serve: drops idle kept conversations. Called and replaced under its mutex, so clearing it
// waits for a call in progress (a request still writing while the server stops).
std::mutex g_room_maker_mutex;
DiskColdStore::RoomMaker g_room_maker;

// The bytes the room maker freed (0 without one).
int64_t MakeProcessRoom(int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_room_maker_mutex);
  return g_room_maker ? g_room_maker(bytes) : 0;
}

bool HasRoomMaker() {
  std::lock_guard<std::mutex> lock(g_room_maker_mutex);
  return static_cast<bool>(g_room_maker);
}

// Reserves `bytes` of the process's cap (-1: none) in g_process_live; false, with nothing
// reserved, when they would pass it. `before` is what the process held just before.
bool ReserveProcessBytes(int64_t bytes, int64_t limit, int64_t* before) {
  *before = g_process_live.fetch_add(bytes);
  if (limit < 0 || *before + bytes <= limit) return true;
  g_process_live -= bytes;
  return false;
}

}  // namespace

int64_t DiskColdStore::ProcessLiveBytes() { return g_process_live.load(); }
void DiskColdStore::SetProcessDiskLimit(int64_t bytes) { g_process_limit.store(bytes); }
void DiskColdStore::SetProcessRoomMaker(RoomMaker make_room) {
  std::lock_guard<std::mutex> lock(g_room_maker_mutex);
  g_room_maker = std::move(make_room);
}
int64_t DiskColdStore::ProcessDiskLimit() { return g_process_limit.load(); }

DiskColdStore::DiskColdStore(const std::string& dir, int64_t block_bytes, int64_t disk_limit_bytes)
    : dir_(DefaultDir(dir)),
      block_bytes_(block_bytes),
      slot_bytes_(block_bytes + kChecksumBytes),
      disk_limit_bytes_(disk_limit_bytes) {
  QEVICT_CHECK(block_bytes > 0);
  std::string pattern = dir_ + "/qevict-cold-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = mkstemp(name.data());
  if (fd_ < 0) {
    throw ColdStoreError(ColdStoreError::Kind::kUnavailable,
                         "cold store: cannot create a file in '" + dir_ +
                             "': " + std::strerror(errno) +
                             " (pass --kv-cold-dir an existing, writable directory)");
  }
  path_ = name.data();
  unlink(path_.c_str());  // nothing is left behind, even if the process is killed
  write_call_ = [](int fd, const void* buf, size_t n, off_t offset) {
    return pwrite(fd, buf, n, offset);
  };
}

DiskColdStore::~DiskColdStore() {
  g_process_live -= live_bytes();
  if (fd_ >= 0) close(fd_);
}

std::string DiskColdStore::Where(int32_t slot) const {
  return "cold store " + path_ + " (unlinked), slot " + std::to_string(slot) + " at byte " +
         std::to_string(static_cast<int64_t>(slot) * slot_bytes_);
}

int64_t DiskColdStore::ram_bytes() const {
  return static_cast<int64_t>(live_.capacity() * sizeof(uint64_t));
}

bool DiskColdStore::IsLive(int32_t slot) const {
  return slot >= 0 && slot < slots_ && (live_[slot >> 6] >> (slot & 63) & 1) != 0;
}

void DiskColdStore::SetLive(int32_t slot, bool live) {
  const uint64_t bit = uint64_t{1} << (slot & 63);
  if (live) {
    live_[slot >> 6] |= bit;
  } else {
    live_[slot >> 6] &= ~bit;
    first_free_word_ = std::min(first_free_word_, static_cast<size_t>(slot >> 6));
  }
}

int32_t DiskColdStore::TakeSlot() {
  // The lowest free slot, from the liveness bits (no free list: a bit a slot is all it costs).
  for (size_t w = first_free_word_; w < live_.size(); ++w) {
    if (~live_[w] == 0) continue;
    const int32_t slot = static_cast<int32_t>(w * 64 + std::countr_one(live_[w]));
    if (slot >= slots_) break;
    first_free_word_ = w;
    return slot;
  }
  QEVICT_CHECK(slots_ < INT32_MAX);
  first_free_word_ = live_.size();
  const int32_t slot = slots_++;
  if (static_cast<size_t>(slot >> 6) >= live_.size()) live_.push_back(0);
  return slot;
}

int32_t DiskColdStore::Write(const void* block, uint64_t tag) {
  if (disk_limit_bytes_ >= 0 && live_bytes() + slot_bytes_ > disk_limit_bytes_) {
    throw ColdStoreError(ColdStoreError::Kind::kNoRoom,
                         "cold store " + path_ + " (unlinked): the disk limit of " +
                             Size(disk_limit_bytes_) + " (--kv-cold-disk-limit) would be passed (" +
                             std::to_string(live_slots_) + " windows, " + Size(live_bytes()) +
                             " on disk); raise --kv-cold-disk-limit, keep " +
                             "more in RAM (a larger --kv-budget) or give a shorter context");
  }
  const int32_t slot = TakeSlot();  // not live until the write succeeds
  // The process's cap: reserve the slot's bytes, given back if the write fails.
  // Where it would pass the cap, the room maker (if any) frees idle stores first, once.
  const int64_t process_limit = g_process_limit.load();
  int64_t before = 0;
  if (!ReserveProcessBytes(slot_bytes_, process_limit, &before) &&
      !(MakeProcessRoom(before + slot_bytes_ - process_limit) > 0 &&
        ReserveProcessBytes(slot_bytes_, process_limit, &before))) {
    SetLive(slot, false);  // (never live: the search may find it again)
    throw ColdStoreError(ColdStoreError::Kind::kNoRoom,
                         "cold store " + path_ + " (unlinked): the cold files of this process " +
                             "together would pass --kv-cold-disk-total " + Size(process_limit) +
                             " (" + Size(before) + " on disk now, " + Size(live_bytes()) +
                             " of them this one's" +
                             (HasRoomMaker() ? ", idle kept conversations closed first" : "") +
                             "); raise --kv-cold-disk-total, keep more of each conversation " +
                             "in RAM or run fewer at once (--slots)");
  }
  // The block and its checksum after it, in one write.
  thread_local std::vector<uint8_t> staged;
  staged.resize(static_cast<size_t>(slot_bytes_));
  std::memcpy(staged.data(), block, static_cast<size_t>(block_bytes_));
  const uint32_t crc = SlotChecksum(slot, tag, staged.data(), block_bytes_);
  for (int b = 0; b < kChecksumBytes; ++b) {
    staged[block_bytes_ + b] = static_cast<uint8_t>(crc >> (8 * b));
  }
  try {
    WriteAll(slot, staged.data());
  } catch (...) {
    SetLive(slot, false);
    g_process_live -= slot_bytes_;
    throw;
  }
  SetLive(slot, true);
  ++live_slots_;
  peak_slots_ = std::max(peak_slots_, live_slots_);
  bytes_written_ += slot_bytes_;
  return slot;
}

void DiskColdStore::WriteAll(int32_t slot, const uint8_t* p) {
  const off_t base = static_cast<off_t>(slot) * slot_bytes_;
  int64_t done = 0;
  while (done < slot_bytes_) {
    const ssize_t n = write_call_(fd_, p + done, static_cast<size_t>(slot_bytes_ - done),
                                  base + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;  // a write that makes no progress: the disk is full
      // Give back what a partial write took (the caller leaves the slot free).
      ReleaseSpace(base, slot_bytes_);
      // EFBIG: past the process's file size limit (ulimit -f), as good as a full disk.
      const bool no_room = err == ENOSPC || err == EDQUOT || err == EFBIG;
      const std::string way_out =
          no_room ? "free space in " + dir_ + " or pass --kv-cold-dir " +
                        "a directory on a disk with room"
                  : "check the disk holding " + dir_ + " or pass --kv-cold-dir another directory";
      throw ColdStoreError(no_room ? ColdStoreError::Kind::kNoRoom : ColdStoreError::Kind::kIo,
                           "cannot write " + Where(slot) + ": " + std::strerror(err) + " after " +
                               std::to_string(done) + " of " + std::to_string(slot_bytes_) +
                               " bytes (" + way_out + ")");
    }
    done += n;
  }
}

void DiskColdStore::Read(int32_t slot, uint64_t tag, void* dst) const {
  ReadBlocks({&slot, 1}, {&tag, 1}, dst);
}

void DiskColdStore::ReadBlocks(std::span<const int32_t> slots, std::span<const uint64_t> tags,
                               void* dst) const {
  auto* out = static_cast<uint8_t*>(dst);
  QEVICT_CHECK(tags.size() == slots.size());
  for (int32_t slot : slots) {
    QEVICT_CHECK(IsLive(slot));
  }
  size_t i = 0;
  while (i < slots.size()) {
    // A run of consecutive slots is contiguous in the file; one call reads at most kMaxRunSlots
    // of them (two iovecs a slot, on the stack, well below IOV_MAX).
    size_t j = i + 1;
    while (j < slots.size() && j - i < kMaxRunSlots && slots[j] == slots[j - 1] + 1) ++j;
    ReadRun(slots.data() + i, tags.data() + i, static_cast<int>(j - i), out + i * block_bytes_);
    i = j;
  }
}

int64_t DiskColdStore::Prefetch(std::span<const int32_t> slots) const {
  thread_local std::vector<int32_t> sorted;
  sorted.assign(slots.begin(), slots.end());
  std::sort(sorted.begin(), sorted.end());
  int64_t asked = 0;
  size_t i = 0;
  while (i < sorted.size()) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] <= sorted[j - 1] + 1) ++j;
    const int64_t n = sorted[j - 1] - sorted[i] + 1;
    posix_fadvise(fd_, static_cast<off_t>(sorted[i]) * slot_bytes_,
                  static_cast<off_t>(n * slot_bytes_), POSIX_FADV_WILLNEED);
    asked += n * slot_bytes_;
    i = j;
  }
  prefetch_bytes_ += asked;
  return asked;
}

void DiskColdStore::DropPageCache() const {
  fdatasync(fd_);  // dirty pages are not dropped
  posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
}

void DiskColdStore::ReadRun(const int32_t* slots, const uint64_t* tags, int n,
                            uint8_t* dst) const {
  // The run's slots with one preadv: each block straight into its place in dst, its checksum
  // into `stored` (no staging copy of the blocks), then each block verified.
  QEVICT_CHECK(n > 0 && static_cast<size_t>(n) <= kMaxRunSlots);
  uint8_t stored[kMaxRunSlots][kChecksumBytes];
  iovec iov[2 * kMaxRunSlots];
  for (int b = 0; b < n; ++b) {
    iov[2 * b] = {dst + b * block_bytes_, static_cast<size_t>(block_bytes_)};
    iov[2 * b + 1] = {stored[b], static_cast<size_t>(kChecksumBytes)};
  }
  const int64_t total = n * slot_bytes_;
  const off_t base = static_cast<off_t>(slots[0]) * slot_bytes_;
  int64_t done = 0;
  iovec* next = iov;  // the first iovec not filled yet
  int left = 2 * n;
  while (done < total) {
    const ssize_t got = preadv(fd_, next, left, base + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    const int32_t slot = slots[done / slot_bytes_];
    if (got < 0) {
      throw ColdStoreError(ColdStoreError::Kind::kIo,
                           "cannot read " + Where(slot) + ": " + std::strerror(errno) +
                               " (the window is lost: start again, after checking the disk " +
                               "holding " + dir_ + " or with --kv-cold-dir another directory)");
    }
    if (got == 0) {
      throw ColdStoreError(ColdStoreError::Kind::kDamaged,
                           "cannot read " + Where(slot) + ": the file ends " +
                               std::to_string(done % slot_bytes_) + " bytes into the block " +
                               "(it was truncated from outside qevict: the window is lost; " +
                               "start again, and leave the files in " + dir_ + " alone)");
    }
    done += got;
    // A short read: skip the iovecs it filled, and the part of the one it stopped in.
    for (size_t rest = static_cast<size_t>(got); rest > 0;) {
      if (rest >= next->iov_len) {
        rest -= next->iov_len;
        ++next;
        --left;
      } else {
        next->iov_base = static_cast<uint8_t*>(next->iov_base) + rest;
        next->iov_len -= rest;
        rest = 0;
      }
    }
  }
  bytes_read_ += total;
  for (int b = 0; b < n; ++b) Verify(slots[b], tags[b], dst + b * block_bytes_, stored[b]);
}

void DiskColdStore::Verify(int32_t slot, uint64_t tag, const uint8_t* block,
                           const uint8_t* checksum) const {
  const uint32_t crc = SlotChecksum(slot, tag, block, block_bytes_);
  const uint32_t written = LoadLe32(checksum);
  if (crc != written) {
    char detail[64];
    std::snprintf(detail, sizeof detail, "CRC-32C %08x, written as %08x", crc, written);
    throw ColdStoreError(ColdStoreError::Kind::kDamaged,
                         "checksum mismatch reading " + Where(slot) + ": " + detail +
                             " (the file was changed on disk, or a write to it was lost: the " +
                             "window is lost; start " +
                             "again, and check the disk holding " + dir_ + ")");
  }
}

int64_t DiskColdStore::PageCacheBytes() const {
  const int64_t size = static_cast<int64_t>(slots_) * slot_bytes_;
  if (size <= 0) return 0;
  void* map = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd_, 0);
  if (map == MAP_FAILED) return -1;
  const int64_t page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> in_core(static_cast<size_t>((size + page - 1) / page));
  int64_t cached = -1;
  if (mincore(map, static_cast<size_t>(size), in_core.data()) == 0) {
    cached = 0;
    for (unsigned char c : in_core) cached += c & 1;
    cached = std::min(size, cached * page);
  }
  munmap(map, static_cast<size_t>(size));
  return cached;
}

void DiskColdStore::ReleaseSpace(int64_t offset, int64_t bytes) {
#ifdef FALLOC_FL_PUNCH_HOLE
  // Best effort: a file system without hole punching keeps the bytes until the slot is reused.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
            static_cast<off_t>(bytes));
#endif
}

void DiskColdStore::Free(int32_t slot) {
  QEVICT_CHECK(IsLive(slot));
  SetLive(slot, false);
  --live_slots_;
  g_process_live -= slot_bytes_;
  ReleaseSpace(static_cast<int64_t>(slot) * slot_bytes_, slot_bytes_);
}

void DiskColdStore::Reset() {
  g_process_live -= live_bytes();
  if (ftruncate(fd_, 0) != 0) ReleaseSpace(0, static_cast<int64_t>(slots_) * slot_bytes_);
  live_.clear();
  slots_ = 0;
  first_free_word_ = 0;
  live_slots_ = 0;
  peak_slots_ = 0;
}

}  // namespace qevict
