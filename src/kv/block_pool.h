// Fixed-size blocks for window storage, carved from page-aligned slabs that are mapped from and
// returned to the OS. One pool serves one block size (fp16 windows, quantized windows, sinks).
// A freed block is reused by the next allocation; a slab whose blocks are all free is unmapped
// (one empty slab is kept to absorb alloc/free churn). live_bytes() is exactly the bytes of
// blocks handed out and not yet freed: the tiered cache reports its tiers from these counters,
// and CountLiveBlocks() recounts them from the slabs' own free lists so tests can check both.
//
// Freeing blocks alone leaves survivors scattered over many slabs, each of which stays mapped.
// Compact() moves live blocks out of the emptiest slabs into the holes of the fullest ones and
// unmaps every slab it empties, so afterwards reserved_bytes() <= live bytes rounded up to whole
// slabs: ceil(live_blocks / blocks_per_slab) slabs, nothing more. Handles change; the owner
// updates its references from the relocation callback (docs/kv-cache.md, "Memory").
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace qevict {

class BlockPool {
 public:
  static constexpr uint32_t kNoBlock = 0xffffffffu;

  // blocks_per_slab must be a power of two <= 65536.
  explicit BlockPool(int64_t block_bytes, int blocks_per_slab = 64);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  uint32_t Allocate();  // a handle; the block's contents are unspecified
  void Free(uint32_t handle);
  uint8_t* data(uint32_t handle) const {
    return slabs_[handle >> slab_shift_].base +
           static_cast<int64_t>(handle & (blocks_per_slab_ - 1)) * block_bytes_;
  }

  // Moves live blocks so that they fill the fewest slabs, then unmaps every empty slab (the
  // spare kept for churn too). relocate(from, to) runs after a block's bytes were copied to its
  // new handle. Returns the number of blocks moved. Not thread-safe (call between batches).
  int64_t Compact(const std::function<void(uint32_t from, uint32_t to)>& relocate);
  int64_t slab_bytes() const { return slab_bytes_; }
  int blocks_per_slab() const { return blocks_per_slab_; }
  // Slabs the live blocks need at least: what reserved_bytes() is after Compact().
  int64_t MinimumSlabs() const { return (live_blocks_ + blocks_per_slab_ - 1) / blocks_per_slab_; }

  void Reset();  // frees every block and unmaps every slab
  // Becomes a copy of `other` (same block size): same handles, same contents, same free lists.
  void CopyFrom(const BlockPool& other);

  int64_t block_bytes() const { return block_bytes_; }
  int64_t live_blocks() const { return live_blocks_; }
  int64_t live_bytes() const { return live_blocks_ * block_bytes_; }
  int64_t peak_live_bytes() const { return peak_live_blocks_ * block_bytes_; }
  int64_t reserved_bytes() const { return mapped_slabs_ * slab_bytes_; }  // mapped from the OS
  void ResetPeak() { peak_live_blocks_ = live_blocks_; }

  // Live blocks recounted from every slab's free list (slow; for tests and checks).
  int64_t CountLiveBlocks() const;

 private:
  struct Slab {
    uint8_t* base = nullptr;           // nullptr: unmapped, index reusable
    std::vector<uint16_t> free_slots;  // stack of free block indices in this slab
  };

  int NewSlab();
  void ReleaseSlab(int index);
  void SetNonFull(int index, bool non_full);
  int FirstNonFull() const;

  int64_t block_bytes_;
  int blocks_per_slab_;
  int slab_shift_;
  int64_t slab_bytes_;
  std::vector<Slab> slabs_;
  std::vector<uint64_t> non_full_;  // bit per slab index: mapped and has a free block
  int64_t live_blocks_ = 0;
  int64_t peak_live_blocks_ = 0;
  int64_t mapped_slabs_ = 0;
  int empty_slabs_ = 0;  // mapped slabs with no live block
};

}  // namespace qevict
