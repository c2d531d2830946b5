// The disk cold store of the cold tier (issue 38; docs/kv-cache.md, "Cold tier and recall"): every
// window that leaves the fp16 tier kept bit-exact on disk, outside the memory
// budget. One block per window (its fp16 keys and values, [2][n_kv_heads][W][head_dim], block_bytes
// in all) in a file created in a directory of the user's choice and unlinked at once, so nothing is
// left on disk even when the process is killed. Blocks are written with pwrite and read with pread
// (never mapped: the page cache may keep them, but the process's resident set does not grow
// with the cold tier). Each block is followed on disk by its CRC-32C (of the slot number, the
// block's tag and the block), verified on every read against the tag the reader expects: a block
// that changed on disk, that sits at another slot's place, or that an acknowledged write failed
// to replace (the slot's earlier block) is an error naming its slot, never wrong attention. The
// tag is the caller's name for the block (the cache: its layer and window, ColdBlockTag), so RAM
// keeps a bit per slot (live or free) and nothing else per block.
//
// Freed slots are reused (the lowest free one first), and their disk space is given back (hole punched) where the file
// system can, so live_bytes() is what the cold tier occupies on disk. An optional disk limit
// makes a write that would pass it an error instead of filling the disk.
//
// The one cold store of a tiered cache (kv/window_store.h): the cold tier's windows and the fp16
// originals kept for exact recovery. Nothing is mapped: a full disk, a file truncated or
// removed under it, a damaged block are errors of a call (ColdStoreError), never a signal.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "util/error.h"

namespace qevict {

// A fault of the cold store, with its message naming the file (the directory it was created in,
// and that it is unlinked) and the way out. kNoRoom: the disk is full or the disk limit would be
// passed (room is the way out; the server answers 507); kDamaged: the file was truncated or a
// block changed under qevict (the window is lost); kIo: any other read or write error;
// kUnavailable: the file cannot be created.
class ColdStoreError : public Error {
 public:
  enum class Kind { kUnavailable, kNoRoom, kDamaged, kIo };
  ColdStoreError(Kind kind, const std::string& message) : Error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// The tag the cache gives a window's block: its layer and window number, so that a read names
// the window it expects (DiskColdStore::Write).
constexpr uint64_t ColdBlockTag(int layer, int64_t window) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) |
         static_cast<uint32_t>(window);
}

class DiskColdStore {
 public:
  // A store of blocks of block_bytes each in a new unlinked file in dir ("" means $TMPDIR, else
  // /tmp). disk_limit_bytes < 0: no limit but the disk's own. Throws ColdStoreError when the file
  // cannot be created (missing or unwritable directory), naming the directory and the way out.
  // Every error below is a ColdStoreError too; the store stays usable after a failed Write.
  DiskColdStore(const std::string& dir, int64_t block_bytes, int64_t disk_limit_bytes = -1);
  ~DiskColdStore();
  DiskColdStore(const DiskColdStore&) = delete;
  DiskColdStore& operator=(const DiskColdStore&) = delete;

  // Writes one block (block_bytes bytes) to a free slot and returns the slot; `tag` is what a
  // read of it must name (checked through the checksum, not stored apart). Throws
  // qevict::Error, with nothing allocated, when the disk limit would be passed or the write
  // fails (ENOSPC, EDQUOT, EIO...).
  int32_t Write(const void* block, uint64_t tag);
  // Reads one block into dst (block_bytes bytes), checksum verified against `tag`.
  // Reads are safe from several threads at once (pread; the counter is atomic), not beside a
  // Write, Free or Reset.
  void Read(int32_t slot, uint64_t tag, void* dst) const;
  // Reads slots.size() blocks into dst, block i at dst + i * block_bytes: one layer's recalls
  // at once; tags[i] is block i's tag. Runs of consecutive slots are read with one call. Every
  // block's checksum is verified; a short read (the file was truncated) or a mismatch (a changed
  // block, another slot's, or another tag's) throws qevict::Error naming the slot.
  void ReadBlocks(std::span<const int32_t> slots, std::span<const uint64_t> tags,
                  void* dst) const;
  // Asks the kernel to start reading these slots into the page cache now, without waiting
  // (posix_fadvise WILLNEED, a call per run of consecutive slots): the next layer's reads
  // issued while this layer computes, so that its ReadBlocks finds them in memory. Nothing is
  // read into the process, nothing is verified (ReadBlocks does that). Returns the bytes asked
  // for; a file system that ignores the advice costs nothing. Safe beside reads and writes of
  // other threads (it touches only the descriptor).
  int64_t Prefetch(std::span<const int32_t> slots) const;
  // Writes the file's dirty pages out and asks the kernel to drop the file from the page cache
  // (POSIX_FADV_DONTNEED): what a reader finds under memory pressure, or after the OS gave the
  // cache to someone else. For benchmarks (bench --cold-page-cache dropped) and tests.
  void DropPageCache() const;
  // Gives a slot back (its block is no longer needed); its disk space is released.
  void Free(int32_t slot);
  // Frees every slot and gives the whole file's space back.
  void Reset();

  // The checksum stored after each block on disk.
  static constexpr int kChecksumBytes = 4;

  int64_t block_bytes() const { return block_bytes_; }
  // What a slot takes on disk: its block and checksum. The byte figures below count slots.
  int64_t slot_bytes() const { return slot_bytes_; }
  int64_t live_slots() const { return live_slots_; }
  int64_t live_bytes() const { return live_slots_ * slot_bytes_; }  // on disk now
  int64_t peak_bytes() const { return peak_slots_ * slot_bytes_; }
  int64_t bytes_written() const { return bytes_written_; }  // since creation, Reset included
  int64_t bytes_read() const { return bytes_read_.load(); }
  int64_t prefetch_bytes() const { return prefetch_bytes_.load(); }  // asked of the kernel
  int64_t disk_limit_bytes() const { return disk_limit_bytes_; }
  // Every cold store of the process together: the bytes they hold on disk now, and a cap on it
  // (`serve --kv-cold-disk-total`; -1, the default: none). A Write that would pass the cap is a
  // kNoRoom error naming it, as the store's own limit is; the store stays usable.
  static int64_t ProcessLiveBytes();
  static void SetProcessDiskLimit(int64_t bytes);
  static int64_t ProcessDiskLimit();
  // What a Write that would pass the process's cap calls first, with the bytes it lacks: the
  // holder of idle stores (`serve`'s kept conversations) closes some of them, least recently used
  // first, and returns the bytes their files held; the write then tries the cap once more. Called
  // on the writing thread, with the writer's own store busy: it must not touch that store. Set
  // before any store writes and cleared before its holder goes (nullptr: none, the default).
  using RoomMaker = std::function<int64_t(int64_t bytes)>;
  static void SetProcessRoomMaker(RoomMaker make_room);
  // Bytes of the file the OS page cache holds now (mincore over a read-only mapping that is never
  // touched, so the query itself faults nothing in): memory the kernel may give back at any time,
  // charged to no process's RSS, reported beside the resident bytes. -1 where it cannot tell.
  int64_t PageCacheBytes() const;
  // RAM the store keeps: a liveness bit per slot ever used (beside the digests, what the cold
  // tier costs in memory).
  int64_t ram_bytes() const;
  // The file's name when it was created (it no longer exists: it was unlinked at once).
  const std::string& path() const { return path_; }

  // Test seams: the descriptor (to truncate or corrupt the file as an outside process could) and
  // the write call (to fail or shorten a write as a full disk does).
  int fd_for_testing() const { return fd_; }
  using WriteCall = std::function<ssize_t(int fd, const void* buf, size_t n, off_t offset)>;
  void set_write_call_for_testing(WriteCall call) { write_call_ = std::move(call); }

 private:
  void WriteAll(int32_t slot, const uint8_t* stored);  // slot_bytes_ bytes: block, checksum
  void ReadRun(const int32_t* slots, const uint64_t* tags, int n, uint8_t* dst) const;
  // Checks a block read from `slot` against the checksum stored after it.
  void Verify(int32_t slot, uint64_t tag, const uint8_t* block, const uint8_t* checksum) const;
  bool IsLive(int32_t slot) const;
  void SetLive(int32_t slot, bool live);
  int32_t TakeSlot();  // the lowest free slot, or a new one; live once its write succeeds
  void ReleaseSpace(int64_t offset, int64_t bytes);
  std::string Where(int32_t slot) const;

  std::string dir_;
  std::string path_;
  int fd_ = -1;
  int64_t block_bytes_;
  int64_t slot_bytes_;
  int64_t disk_limit_bytes_;
  std::vector<uint64_t> live_;   // a bit per slot ever handed out: 1 while it holds a block
  int32_t slots_ = 0;            // slots ever handed out (the file's length in slots)
  size_t first_free_word_ = 0;   // no free slot below live_[first_free_word_]
  int64_t live_slots_ = 0;
  int64_t peak_slots_ = 0;
  int64_t bytes_written_ = 0;
  mutable std::atomic<int64_t> bytes_read_{0};
  mutable std::atomic<int64_t> prefetch_bytes_{0};
  WriteCall write_call_;
};

}  // namespace qevict
