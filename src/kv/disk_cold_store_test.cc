#include "kv/disk_cold_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kv/crc32c.h"
#include "util/error.h"

namespace qevict {
namespace {

constexpr int64_t kBlock = 6144;  // one SmolLM2-135M window: 2 x 3 heads x 8 tokens x 64 x fp16
constexpr int64_t kSlot = kBlock + DiskColdStore::kChecksumBytes;  // on disk: block, checksum

constexpr uint64_t kTag = ColdBlockTag(3, 17);  // what the tests' blocks are said to be

std::vector<uint64_t> Tags(size_t n) { return std::vector<uint64_t>(n, kTag); }

std::vector<uint8_t> Pattern(int seed) {
  std::vector<uint8_t> b(kBlock);
  for (int64_t i = 0; i < kBlock; ++i) b[i] = static_cast<uint8_t>(i * 31 + seed * 7 + 1);
  return b;
}

// The message of the ColdStoreError `f` throws ("" when it throws none), and its kind.
template <class F>
std::string ErrorOf(F&& f, ColdStoreError::Kind* kind = nullptr) {
  try {
    f();
  } catch (const ColdStoreError& e) {
    if (kind != nullptr) *kind = e.kind();
    return e.what();
  }
  return "";
}

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(Crc32c("", 0), 0u);
  const std::string a = "The quick brown fox jumps over the lazy dog";
  // Extending a checksum equals checksumming the whole.
  EXPECT_EQ(Crc32c(a.data() + 10, a.size() - 10, Crc32c(a.data(), 10)), Crc32c(a.data(), a.size()));
  EXPECT_EQ(Crc32c(a.data(), a.size()), 0x22620404u);
}

// The instruction path (where the CPU has one) and the tables agree on every length and
// alignment, and when a checksum is continued.
TEST(Crc32c, TheInstructionPathAndTheTablesAgree) {
  std::vector<uint8_t> bytes(4096 + 16);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 17);
  for (size_t offset : {0, 1, 3, 7}) {
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 63, 1000, 4096}) {
      const uint8_t* p = bytes.data() + offset;
      EXPECT_EQ(Crc32c(p, n), Crc32cPortable(p, n)) << offset << " " << n;
      EXPECT_EQ(Crc32c(p + n / 2, n - n / 2, Crc32c(p, n / 2)), Crc32cPortable(p, n));
    }
  }
  EXPECT_EQ(Crc32cPortable("123456789", 9), 0xE3069283u);
}

TEST(DiskColdStore, BlocksRoundTripBitExactAndSlotsAreReused) {
  DiskColdStore store("", kBlock);
  const auto a = Pattern(1), b = Pattern(2), c = Pattern(3);
  const int32_t sa = store.Write(a.data(), kTag), sb = store.Write(b.data(), kTag);
  EXPECT_NE(sa, sb);
  std::vector<uint8_t> got(kBlock);
  store.Read(sb, kTag, got.data());
  EXPECT_EQ(got, b);
  store.Read(sa, kTag, got.data());
  EXPECT_EQ(got, a);
  EXPECT_EQ(store.slot_bytes(), kSlot);
  EXPECT_EQ(store.live_bytes(), 2 * kSlot);
  EXPECT_EQ(store.bytes_written(), 2 * kSlot);
  EXPECT_EQ(store.bytes_read(), 2 * kSlot);
  store.Free(sa);
  EXPECT_EQ(store.live_bytes(), kSlot);
  EXPECT_EQ(store.Write(c.data(), kTag), sa);  // the freed slot is reused
  store.Read(sa, kTag, got.data());
  EXPECT_EQ(got, c);
  EXPECT_EQ(store.peak_bytes(), 2 * kSlot);
  // The file was unlinked at creation: nothing is left on disk.
  struct stat st;
  EXPECT_NE(stat(store.path().c_str(), &st), 0);
  store.Reset();
  EXPECT_EQ(store.live_bytes(), 0);
  EXPECT_EQ(store.Write(a.data(), kTag), 0);
}

TEST(DiskColdStore, BatchReadReturnsEveryBlockInTheOrderAsked) {
  DiskColdStore store("", kBlock);
  std::vector<std::vector<uint8_t>> blocks;
  for (int i = 0; i < 6; ++i) {
    blocks.push_back(Pattern(10 + i));
    EXPECT_EQ(store.Write(blocks.back().data(), kTag), i);
  }
  // Runs of consecutive slots (1, 2, 3) and slots out of order (5, 0) in one batch.
  const std::vector<int32_t> slots = {1, 2, 3, 5, 0};
  std::vector<uint8_t> dst(slots.size() * kBlock);
  store.ReadBlocks(slots, Tags(slots.size()), dst.data());
  for (size_t i = 0; i < slots.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(dst.data() + i * kBlock, blocks[slots[i]].data(), kBlock)) << i;
  }
  EXPECT_EQ(store.bytes_read(), 5 * kSlot);
}

// A run longer than one read takes (64 slots) comes back whole, in order.
TEST(DiskColdStore, ALongRunIsReadInPiecesAndComesBackWhole) {
  DiskColdStore store("", kBlock);
  std::vector<int32_t> slots;
  for (int i = 0; i < 150; ++i) slots.push_back(store.Write(Pattern(100 + i).data(), kTag));
  std::vector<uint8_t> dst(slots.size() * kBlock);
  store.ReadBlocks(slots, Tags(slots.size()), dst.data());
  for (size_t i = 0; i < slots.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(dst.data() + i * kBlock, Pattern(100 + static_cast<int>(i)).data(),
                             kBlock))
        << i;
  }
  EXPECT_EQ(store.bytes_read(), 150 * kSlot);
}

// Freed slots are taken lowest first, from a liveness bit per slot: what RAM holds per slot.
TEST(DiskColdStore, FreedSlotsAreReusedLowestFirstAndRamIsABitPerSlot) {
  DiskColdStore store("", kBlock);
  const auto a = Pattern(1);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(store.Write(a.data(), kTag), i);
  EXPECT_LE(store.ram_bytes(), 2 * (200 / 8 + 8));  // bits, in 64-bit words (and capacity)
  for (int32_t s : {130, 7, 64}) store.Free(s);
  EXPECT_EQ(store.Write(a.data(), kTag), 7);
  EXPECT_EQ(store.Write(a.data(), kTag), 64);
  EXPECT_EQ(store.Write(a.data(), kTag), 130);
  EXPECT_EQ(store.Write(a.data(), kTag), 200);
  EXPECT_EQ(store.live_slots(), 201);
}

TEST(DiskColdStore, FreedSlotsGiveTheirDiskSpaceBack) {
  DiskColdStore store("", 1 << 20);
  std::vector<uint8_t> big(1 << 20, 0x5a);
  std::vector<int32_t> slots;
  for (int i = 0; i < 4; ++i) slots.push_back(store.Write(big.data(), kTag));
  struct stat st;
  ASSERT_EQ(fstat(store.fd_for_testing(), &st), 0);
  const int64_t used = static_cast<int64_t>(st.st_blocks) * 512;
  EXPECT_GE(used, 4 << 20);
  for (int32_t s : slots) store.Free(s);
  ASSERT_EQ(fstat(store.fd_for_testing(), &st), 0);
  // Hole punching is best effort (a file system may lack it); where it exists (ext4, xfs,
  // tmpfs, btrfs) the freed megabytes are gone from the disk.
  if (static_cast<int64_t>(st.st_blocks) * 512 < used) {
    EXPECT_LT(static_cast<int64_t>(st.st_blocks) * 512, 1 << 20);
  }
  EXPECT_EQ(store.live_bytes(), 0);
}

// What the page cache holds of the file is reported (never counted as resident): just written,
// the blocks are there; the query faults nothing into the process (RSS does not grow by them).
TEST(DiskColdStore, ReportsWhatThePageCacheHoldsOfTheFile) {
  DiskColdStore store("", 1 << 20);
  EXPECT_EQ(store.PageCacheBytes(), 0);
  std::vector<uint8_t> big(1 << 20, 0x5a);
  for (int i = 0; i < 8; ++i) store.Write(big.data(), kTag);
  const int64_t cached = store.PageCacheBytes();
  EXPECT_GT(cached, 0);
  EXPECT_LE(cached, store.live_bytes());
}

// Prefetch brings dropped blocks back into the page cache without reading them into the process:
// the next layer's recalls, asked for while this layer computes. In the build directory (a disk
// file system, as the cold directory of a run); on tmpfs the page cache is the file itself, so
// nothing can be dropped and the test says so by what it checks.
TEST(DiskColdStore, PrefetchBringsDroppedBlocksBackIntoThePageCache) {
  DiskColdStore store(".", 1 << 20);
  std::vector<uint8_t> big(1 << 20, 0x5a);
  std::vector<int32_t> slots;
  for (int i = 0; i < 8; ++i) slots.push_back(store.Write(big.data(), kTag));
  const int64_t live = store.live_bytes();
  struct statfs fs {};
  ASSERT_EQ(fstatfs(store.fd_for_testing(), &fs), 0);
  store.DropPageCache();
  if (fs.f_type == TMPFS_MAGIC) {
    EXPECT_EQ(store.PageCacheBytes(), live);  // tmpfs: memory is where the file lives
  } else {
    EXPECT_LT(store.PageCacheBytes(), live / 4);
  }
  const int64_t before = store.bytes_read();
  // Two runs (slots 0-2 and 5-7): the bytes asked for, and only those come back.
  const std::vector<int32_t> wanted = {slots[5], slots[0], slots[6], slots[1], slots[7], slots[2]};
  EXPECT_EQ(store.Prefetch(wanted), 6 * store.slot_bytes());
  int64_t cached = 0;
  for (int tries = 0; tries < 500 && cached < 6 * store.block_bytes(); ++tries) {
    usleep(10000);  // readahead completes in the background
    cached = store.PageCacheBytes();
  }
  EXPECT_GE(cached, 6 * store.block_bytes());
  EXPECT_EQ(store.bytes_read(), before);  // nothing was read into the process
  std::vector<uint8_t> got(static_cast<size_t>(store.block_bytes()));
  store.Read(slots[6], kTag, got.data());  // and what is read is verified as ever
  EXPECT_EQ(got, big);
}

// The process's cap (serve --kv-cold-disk-total) counts every store's live blocks together: a
// write that would pass it is a kNoRoom error naming the flag, with nothing written; freeing a
// block of another store, or that store closing, makes room again.
TEST(DiskColdStore, TheProcessCapCountsEveryStoreTogether) {
  struct Restore {
    ~Restore() { DiskColdStore::SetProcessDiskLimit(-1); }
  } restore;
  const int64_t base = DiskColdStore::ProcessLiveBytes();
  DiskColdStore::SetProcessDiskLimit(base + 3 * kSlot);
  auto a = std::make_unique<DiskColdStore>("", kBlock);
  DiskColdStore b("", kBlock);
  const int32_t a0 = a->Write(Pattern(1).data(), kTag);
  a->Write(Pattern(2).data(), kTag);
  b.Write(Pattern(3).data(), kTag);
  EXPECT_EQ(DiskColdStore::ProcessLiveBytes(), base + 3 * kSlot);
  ColdStoreError::Kind kind{};
  const std::string full = ErrorOf([&] { b.Write(Pattern(4).data(), kTag); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kNoRoom);
  EXPECT_NE(full.find("--kv-cold-disk-total"), std::string::npos) << full;
  EXPECT_NE(full.find(b.path()), std::string::npos) << full;
  EXPECT_EQ(b.live_slots(), 1);
  EXPECT_EQ(DiskColdStore::ProcessLiveBytes(), base + 3 * kSlot);
  a->Free(a0);
  const int32_t b1 = b.Write(Pattern(4).data(), kTag);
  std::vector<uint8_t> got(kBlock);
  b.Read(b1, kTag, got.data());
  EXPECT_EQ(got, Pattern(4));
  EXPECT_THROW(b.Write(Pattern(5).data(), kTag), ColdStoreError);
  a.reset();  // its last block goes with it
  EXPECT_EQ(DiskColdStore::ProcessLiveBytes(), base + 2 * kSlot);
  b.Write(Pattern(5).data(), kTag);
  b.Reset();
  EXPECT_EQ(DiskColdStore::ProcessLiveBytes(), base);
}

// A write that would pass the process's cap asks the room maker first (serve: idle kept
// conversations closed, least recently used first) with the bytes it lacks, and succeeds when
// that freed them; when the maker frees nothing the write is the kNoRoom error, saying idle
// conversations were closed first, with nothing written.
TEST(DiskColdStore, APassedProcessCapClosesIdleStoresFirst) {
  struct Restore {
    ~Restore() {
      DiskColdStore::SetProcessDiskLimit(-1);
      DiskColdStore::SetProcessRoomMaker(nullptr);
    }
  } restore;
  const int64_t base = DiskColdStore::ProcessLiveBytes();
  DiskColdStore::SetProcessDiskLimit(base + 3 * kSlot);
  auto idle = std::make_unique<DiskColdStore>("", kBlock);
  idle->Write(Pattern(1).data(), kTag);
  idle->Write(Pattern(2).data(), kTag);
  std::vector<int64_t> asked;
  DiskColdStore::SetProcessRoomMaker([&](int64_t bytes) -> int64_t {
    asked.push_back(bytes);
    if (idle == nullptr) return 0;
    const int64_t freed = idle->live_bytes();
    idle.reset();
    return freed;
  });
  DiskColdStore busy("", kBlock);
  busy.Write(Pattern(3).data(), kTag);
  EXPECT_TRUE(asked.empty());  // within the cap: not asked
  const int32_t second = busy.Write(Pattern(4).data(), kTag);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], kSlot);  // one slot lacked
  EXPECT_EQ(idle, nullptr);
  EXPECT_EQ(DiskColdStore::ProcessLiveBytes(), base + 2 * kSlot);
  std::vector<uint8_t> got(kBlock);
  busy.Read(second, kTag, got.data());
  EXPECT_EQ(got, Pattern(4));
  busy.Write(Pattern(5).data(), kTag);
  ColdStoreError::Kind kind{};
  const std::string full = ErrorOf([&] { busy.Write(Pattern(6).data(), kTag); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kNoRoom);
  EXPECT_EQ(asked.size(), 2u);
  EXPECT_NE(full.find("idle kept conversations closed first"), std::string::npos) << full;
  EXPECT_EQ(busy.live_slots(), 3);
  EXPECT_EQ(DiskColdStore::ProcessLiveBytes(), base + 3 * kSlot);
}

TEST(DiskColdStore, MissingOrUnwritableDirectoryIsAnErrorNamingIt) {
  const std::string missing = ErrorOf([] { DiskColdStore("/nonexistent/qevict-dir", kBlock); });
  EXPECT_NE(missing.find("/nonexistent/qevict-dir"), std::string::npos) << missing;
  EXPECT_NE(missing.find("pass --kv-cold-dir an existing, writable directory"), std::string::npos)
      << missing;
  // A path that is a file, not a directory.
  char file[] = "/tmp/qevict-not-a-dir-XXXXXX";
  const int fd = mkstemp(file);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string not_dir = ErrorOf([&] { DiskColdStore(file, kBlock); });
  unlink(file);
  EXPECT_NE(not_dir.find(file), std::string::npos) << not_dir;
  EXPECT_NE(not_dir.find("Not a directory"), std::string::npos) << not_dir;
  // A directory nobody may create files in: sysfs refuses even root.
  const std::string sys = ErrorOf([] { DiskColdStore("/sys", kBlock); });
  EXPECT_NE(sys.find("cannot create a file in '/sys'"), std::string::npos) << sys;
  if (geteuid() != 0) {  // a directory without write permission (root writes there anyway)
    char tmpl[] = "/tmp/qevict-ro-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    chmod(tmpl, 0500);
    const std::string ro = ErrorOf([&] { DiskColdStore(tmpl, kBlock); });
    EXPECT_NE(ro.find(tmpl), std::string::npos) << ro;
    EXPECT_NE(ro.find("Permission denied"), std::string::npos) << ro;
    rmdir(tmpl);
  }
}

TEST(DiskColdStore, DiskLimitIsAClearErrorAndLeavesTheStoreUsable) {
  DiskColdStore store("", kBlock, 2 * kSlot);
  const auto a = Pattern(1);
  const int32_t s0 = store.Write(a.data(), kTag);
  store.Write(a.data(), kTag);
  ColdStoreError::Kind kind{};
  const std::string msg = ErrorOf([&] { store.Write(a.data(), kTag); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kNoRoom);
  EXPECT_NE(msg.find("disk limit"), std::string::npos) << msg;
  EXPECT_NE(msg.find(store.path() + " (unlinked)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("raise --kv-cold-disk-limit"), std::string::npos) << msg;
  EXPECT_EQ(store.live_bytes(), 2 * kSlot);
  store.Free(s0);
  EXPECT_EQ(store.Write(a.data(), kTag), s0);  // room again once a block is freed
}

TEST(DiskColdStore, FullDiskIsAnErrorAndTheSlotIsNotLost) {
  DiskColdStore store("", kBlock);
  const auto a = Pattern(4);
  // A full disk as the kernel reports it: part of the block written, then ENOSPC.
  int calls = 0;
  store.set_write_call_for_testing([&](int fd, const void* buf, size_t n, off_t off) -> ssize_t {
    if (calls++ == 0) return pwrite(fd, buf, n / 2, off);
    errno = ENOSPC;
    return -1;
  });
  ColdStoreError::Kind kind{};
  const std::string msg = ErrorOf([&] { store.Write(a.data(), kTag); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kNoRoom);
  EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
  EXPECT_NE(msg.find(store.path()), std::string::npos) << msg;
  EXPECT_NE(msg.find("slot 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3074 of 6148 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pass --kv-cold-dir a directory on a disk with room"), std::string::npos)
      << msg;
  EXPECT_EQ(store.live_bytes(), 0);
  EXPECT_EQ(store.bytes_written(), 0);
  // A write that makes no progress at all is a full disk too.
  store.set_write_call_for_testing([](int, const void*, size_t, off_t) -> ssize_t { return 0; });
  EXPECT_NE(ErrorOf([&] { store.Write(a.data(), kTag); }).find("No space left"), std::string::npos);
  // Space again: the same slot is used, and the block reads back.
  store.set_write_call_for_testing(
      [](int fd, const void* buf, size_t n, off_t off) { return pwrite(fd, buf, n, off); });
  EXPECT_EQ(store.Write(a.data(), kTag), 0);
  std::vector<uint8_t> got(kBlock);
  store.Read(0, kTag, got.data());
  EXPECT_EQ(got, a);
}

TEST(DiskColdStore, TruncatedFileIsAShortReadError) {
  DiskColdStore store("", kBlock);
  const auto a = Pattern(5), b = Pattern(6);
  store.Write(a.data(), kTag);
  const int32_t sb = store.Write(b.data(), kTag);
  ASSERT_EQ(ftruncate(store.fd_for_testing(), kSlot + 100), 0);  // cuts slot 1 short
  std::vector<uint8_t> got(2 * kBlock);
  store.Read(0, kTag, got.data());  // slot 0 is whole
  EXPECT_EQ(0, std::memcmp(got.data(), a.data(), kBlock));
  ColdStoreError::Kind kind{};
  const std::string msg = ErrorOf([&] { store.Read(sb, kTag, got.data()); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kDamaged);
  EXPECT_NE(msg.find("slot 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find(store.path()), std::string::npos) << msg;
  const std::vector<int32_t> both = {0, 1};
  EXPECT_NE(ErrorOf([&] { store.ReadBlocks(both, Tags(both.size()), got.data()); }).find("slot 1"), std::string::npos);
}

TEST(DiskColdStore, CorruptedBlockIsAChecksumErrorNamingTheSlot) {
  DiskColdStore store("", kBlock);
  const auto a = Pattern(7);
  for (int i = 0; i < 3; ++i) store.Write(a.data(), kTag);
  // Another process (or a failing disk) flips one byte of slot 2, through the file's /proc name.
  const std::string proc = "/proc/self/fd/" + std::to_string(store.fd_for_testing());
  const int fd = open(proc.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t byte = 0;
  const off_t where = 2 * kSlot + 1234;
  ASSERT_EQ(pread(fd, &byte, 1, where), 1);
  byte ^= 0x10;
  ASSERT_EQ(pwrite(fd, &byte, 1, where), 1);
  close(fd);
  std::vector<uint8_t> got(3 * kBlock);
  store.Read(1, kTag, got.data());  // the others are intact
  EXPECT_EQ(0, std::memcmp(got.data(), a.data(), kBlock));
  ColdStoreError::Kind kind{};
  const std::string msg = ErrorOf([&] { store.Read(2, kTag, got.data()); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kDamaged);
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("slot 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find(store.path()), std::string::npos) << msg;
  const std::vector<int32_t> all = {0, 1, 2};
  EXPECT_NE(ErrorOf([&] { store.ReadBlocks(all, Tags(all.size()), got.data()); }).find("slot 2"), std::string::npos);
}

// A whole block written at another slot's place (a misdirected write, or a copy made from outside
// qevict) carries its own slot's number in its checksum: an error, never the other window.
TEST(DiskColdStore, ABlockAtAnotherSlotsPlaceIsAChecksumError) {
  DiskColdStore store("", kBlock);
  store.Write(Pattern(1).data(), kTag);
  store.Write(Pattern(2).data(), kTag);
  std::vector<uint8_t> slot0(kSlot);
  ASSERT_EQ(pread(store.fd_for_testing(), slot0.data(), kSlot, 0), kSlot);
  ASSERT_EQ(pwrite(store.fd_for_testing(), slot0.data(), kSlot, kSlot), kSlot);
  std::vector<uint8_t> got(kBlock);
  store.Read(0, kTag, got.data());
  EXPECT_EQ(got, Pattern(1));
  ColdStoreError::Kind kind{};
  const std::string msg = ErrorOf([&] { store.Read(1, kTag, got.data()); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kDamaged);
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("slot 1"), std::string::npos) << msg;
}

// The checksum covers the tag the writer gave the block: a read that names another window
// fails, and so does a write the disk acknowledged and lost on a reused slot (the slot's earlier
// block, with its own valid checksum, still there; here put back by hand after the write).
TEST(DiskColdStore, ABlockReadAsAnotherWindowOrALostWriteIsAChecksumError) {
  DiskColdStore store("", kBlock);
  const uint64_t first = ColdBlockTag(0, 5), second = ColdBlockTag(0, 9);
  EXPECT_NE(ColdBlockTag(1, 5), first);  // the layer is part of the name
  const int32_t slot = store.Write(Pattern(1).data(), first);
  std::vector<uint8_t> got(kBlock);
  store.Read(slot, first, got.data());
  EXPECT_EQ(got, Pattern(1));
  ColdStoreError::Kind kind{};
  std::string msg = ErrorOf([&] { store.Read(slot, second, got.data()); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kDamaged);
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
  std::vector<uint8_t> earlier(kSlot);
  ASSERT_EQ(pread(store.fd_for_testing(), earlier.data(), kSlot, 0), kSlot);
  store.Free(slot);
  ASSERT_EQ(store.Write(Pattern(2).data(), second), slot);  // the slot is reused
  ASSERT_EQ(pwrite(store.fd_for_testing(), earlier.data(), kSlot, 0), kSlot);  // "lost"
  msg = ErrorOf([&] { store.Read(slot, second, got.data()); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kDamaged);
  EXPECT_NE(msg.find("a write to it was lost"), std::string::npos) << msg;
  EXPECT_NE(msg.find("slot 0"), std::string::npos) << msg;
}

// A read the kernel refuses (an I/O error; here the descriptor replaced by a write-only one, so
// pread fails with EBADF): an error naming the file and slot, never a short or wrong block.
TEST(DiskColdStore, AReadErrorNamesTheFileAndTheWayOut) {
  DiskColdStore store("", kBlock);
  const auto a = Pattern(8);
  store.Write(a.data(), kTag);
  const int write_only = open("/dev/null", O_WRONLY);
  ASSERT_GE(write_only, 0);
  ASSERT_EQ(dup2(write_only, store.fd_for_testing()), store.fd_for_testing());
  close(write_only);
  std::vector<uint8_t> got(kBlock);
  ColdStoreError::Kind kind{};
  const std::string msg = ErrorOf([&] { store.Read(0, kTag, got.data()); }, &kind);
  EXPECT_EQ(kind, ColdStoreError::Kind::kIo);
  EXPECT_NE(msg.find("cannot read cold store " + store.path() + " (unlinked), slot 0"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Bad file descriptor"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--kv-cold-dir"), std::string::npos) << msg;
}

}  // namespace
}  // namespace qevict
