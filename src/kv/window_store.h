// Where a tiered cache's bytes live (docs/kv-cache.md, "Memory"): fixed-size blocks from one
// BlockPool per block size -- fp16 windows [2][n_kv_heads][W][head_dim] fp16, quantized windows
// (QuantLayout::bytes), sink blocks [2][n_kv_heads][S][head_dim] fp16 -- and the disk cold store
// of the fp16 originals of windows that left the fp16 tier (the cold tier, exact recovery). It owns the memory and nothing else: which
// window holds which block is the cache's business. Allocation and freeing are safe from the
// parallel routing step; Compact() runs between batches and hands every moved block's new handle
// back to the owner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "kv/block_pool.h"
#include "kv/disk_cold_store.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "kv/kv_quantizer.h"
#include "kv/routing.h"

namespace qevict {

class WindowStore {
 public:
  // The block kinds: a window's tier (fp16 or quantized) or a layer's sink block.
  enum class Kind { kFp16, kQuant, kSink };

  // With a cold tier (cold_tier: windows the policy evicts are kept on disk) or exact recovery
  // (KvConfig::recovery: a quantized window is promoted from its fp16 original), the fp16
  // originals of windows that leave the fp16 tier go to one disk cold store
  // (kv/disk_cold_store.h: pread/pwrite, checksummed, capped by --kv-cold-disk-limit), created
  // now, so that an unwritable directory is an error before anything runs.
  WindowStore(const KvConfig& config, const KvGeometry& geometry, const QuantLayout& layout,
              bool cold_tier = false);

  // A block's bytes. Not synchronized: outside the parallel routing step only.
  uint8_t* data(Kind kind, uint32_t block) const { return pool(kind).data(block); }
  // Thread-safe, for the parallel routing step.
  uint32_t Allocate(Kind kind);
  uint32_t Allocate(Kind kind, uint8_t** data);  // and the block's bytes
  void Free(Kind kind, uint32_t block);
  const uint8_t* SharedData(Kind kind, uint32_t block);
  // Frees `block` of kind `from` and allocates one of kind `to` (a demotion or promotion);
  // returns the new handle and its bytes in *data.
  uint32_t Replace(Kind from, uint32_t block, Kind to, uint8_t** data);
  static Kind KindOf(Tier tier) { return tier == Tier::kFp16 ? Kind::kFp16 : Kind::kQuant; }

  // Whether windows the policy evicts are kept in the disk store (the cold tier).
  bool cold_tier() const { return cold_tier_; }
  // The disk cold store (nullptr without a cold tier or exact recovery). Reads are
  // thread-safe; writes and frees go through WriteDisk / FreeDisk during the parallel routing
  // step.
  DiskColdStore* disk() { return disk_.get(); }
  const DiskColdStore* disk() const { return disk_.get(); }
  int32_t WriteDisk(const uint8_t* block, uint64_t tag);  // tag: ColdBlockTag(layer, window)
  void ReadDisk(int32_t slot, uint64_t tag, uint8_t* dst);  // beside writes of other threads
  void FreeDisk(int32_t slot);

  int64_t block_bytes(Kind kind) const { return pool(kind).block_bytes(); }
  int64_t fp16_bytes() const;      // live fp16 window and sink blocks
  int64_t quant_bytes() const;     // live quantized window blocks
  int64_t reserved_bytes() const;  // slabs mapped from the OS, all pools
  // Live bytes recounted from the slabs' own free lists (slow; tests check it against the
  // counters above).
  int64_t CountLiveBytes() const;

  // Moves live blocks of every pool into the fewest slabs and unmaps the rest;
  // relocate(kind, from, to) runs for every moved block. Returns the number of blocks moved.
  int64_t Compact(const std::function<void(Kind, uint32_t from, uint32_t to)>& relocate);

  void Reset();                             // frees everything, unmaps every slab
  void CopyFrom(const WindowStore& other);  // same handles, same bytes (forks)

  // Bytes the pools of this geometry may map beyond their live blocks after Compact(): one
  // partly filled slab per pool (the quantized pool only for a policy that quantizes).
  static int64_t SlabSlackBytes(const KvConfig& config, const KvGeometry& geometry,
                                bool quantizes = true);
  static int64_t FpBlockBytes(const KvConfig& config, const KvGeometry& geometry);
  static int64_t SinkBlockBytes(const KvConfig& config, const KvGeometry& geometry);
  static int SinkBlocksPerSlab(const KvGeometry& geometry);

 private:
  // Inline: data() runs for every window the attention reads.
  const BlockPool& pool(Kind kind) const {
    return kind == Kind::kFp16 ? fp_ : kind == Kind::kQuant ? q_ : sink_;
  }
  BlockPool& pool(Kind kind) {
    return kind == Kind::kFp16 ? fp_ : kind == Kind::kQuant ? q_ : sink_;
  }

  BlockPool fp_, q_, sink_;
  bool cold_tier_;
  std::unique_ptr<DiskColdStore> disk_;
  std::mutex mutex_;  // allocation and freeing during the parallel routing step
};

}  // namespace qevict
