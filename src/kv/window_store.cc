#include "kv/window_store.h"

#include <algorithm>
#include <bit>

namespace qevict {

int64_t WindowStore::FpBlockBytes(const KvConfig& c, const KvGeometry& g) {
  return int64_t{2} * g.n_kv_heads * c.window * g.head_dim * 2;
}

int64_t WindowStore::SinkBlockBytes(const KvConfig& c, const KvGeometry& g) {
  return std::max<int64_t>(2, int64_t{2} * g.n_kv_heads * c.sinks * g.head_dim * 2);
}

WindowStore::WindowStore(const KvConfig& config, const KvGeometry& geometry,
                         const QuantLayout& layout, bool cold_tier)
    : fp_(FpBlockBytes(config, geometry)),
      q_(layout.bytes),
      sink_(SinkBlockBytes(config, geometry), SinkBlocksPerSlab(geometry)),
      cold_tier_(cold_tier) {
  if (cold_tier || config.recovery == RecoveryFidelity::kExact) {
    disk_ = std::make_unique<DiskColdStore>(config.cold_store_dir, fp_.block_bytes(),
                                            config.cold_disk_limit);
  }
}

uint32_t WindowStore::Allocate(Kind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  return pool(kind).Allocate();
}

uint32_t WindowStore::Allocate(Kind kind, uint8_t** data) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint32_t block = pool(kind).Allocate();
  *data = pool(kind).data(block);
  return block;
}

void WindowStore::Free(Kind kind, uint32_t block) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool(kind).Free(block);
}

const uint8_t* WindowStore::SharedData(Kind kind, uint32_t block) {
  std::lock_guard<std::mutex> lock(mutex_);
  return pool(kind).data(block);
}

uint32_t WindowStore::Replace(Kind from, uint32_t block, Kind to, uint8_t** data) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool(from).Free(block);
  const uint32_t fresh = pool(to).Allocate();
  *data = pool(to).data(fresh);
  return fresh;
}

int32_t WindowStore::WriteDisk(const uint8_t* block, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  return disk_->Write(block, tag);
}

void WindowStore::ReadDisk(int32_t slot, uint64_t tag, uint8_t* dst) {
  std::lock_guard<std::mutex> lock(mutex_);
  disk_->Read(slot, tag, dst);
}

void WindowStore::FreeDisk(int32_t slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  disk_->Free(slot);
}

int64_t WindowStore::fp16_bytes() const { return fp_.live_bytes() + sink_.live_bytes(); }

int64_t WindowStore::quant_bytes() const { return q_.live_bytes(); }

int64_t WindowStore::reserved_bytes() const {
  return fp_.reserved_bytes() + q_.reserved_bytes() + sink_.reserved_bytes();
}

int64_t WindowStore::CountLiveBytes() const {
  return fp_.CountLiveBlocks() * fp_.block_bytes() + q_.CountLiveBlocks() * q_.block_bytes() +
         sink_.CountLiveBlocks() * sink_.block_bytes();
}

int64_t WindowStore::Compact(const std::function<void(Kind, uint32_t, uint32_t)>& relocate) {
  int64_t moved = 0;
  for (Kind kind : {Kind::kFp16, Kind::kQuant, Kind::kSink}) {
    BlockPool& p = pool(kind);
    if (p.reserved_bytes() <= p.MinimumSlabs() * p.slab_bytes()) continue;  // already dense
    moved += p.Compact([&](uint32_t from, uint32_t to) { relocate(kind, from, to); });
  }
  return moved;
}

void WindowStore::Reset() {
  fp_.Reset();
  q_.Reset();
  sink_.Reset();
  if (disk_) disk_->Reset();
}

void WindowStore::CopyFrom(const WindowStore& other) {
  fp_.CopyFrom(other.fp_);
  q_.CopyFrom(other.q_);
  sink_.CopyFrom(other.sink_);
}

int64_t WindowStore::SlabSlackBytes(const KvConfig& config, const KvGeometry& geometry,
                                    bool quantizes) {
  const QuantLayout q = QuantLayout::Make(geometry.n_kv_heads, config.window, geometry.head_dim,
                                          config.bits, config.value_group);
  return BlockPool(FpBlockBytes(config, geometry)).slab_bytes() +
         (quantizes ? BlockPool(q.bytes).slab_bytes() : 0) +
         BlockPool(SinkBlockBytes(config, geometry), SinkBlocksPerSlab(geometry)).slab_bytes();
}

// One slab holds every layer's sink block.
int WindowStore::SinkBlocksPerSlab(const KvGeometry& geometry) {
  return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::clamp(geometry.n_layers, 1, 65536))));
}

}  // namespace qevict
