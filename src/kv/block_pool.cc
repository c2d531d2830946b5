#include "kv/block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <string>

#include "util/error.h"

namespace qevict {

BlockPool::BlockPool(int64_t block_bytes, int blocks_per_slab)
    : block_bytes_(block_bytes), blocks_per_slab_(blocks_per_slab) {
  QEVICT_CHECK(block_bytes > 0 && blocks_per_slab > 0 && blocks_per_slab <= 65536 &&
               std::has_single_bit(static_cast<unsigned>(blocks_per_slab)));
  slab_shift_ = std::countr_zero(static_cast<unsigned>(blocks_per_slab));
  const int64_t page = sysconf(_SC_PAGESIZE);
  slab_bytes_ = (block_bytes * blocks_per_slab + page - 1) / page * page;
}

BlockPool::~BlockPool() { Reset(); }

void BlockPool::Reset() {
  for (int i = 0; i < static_cast<int>(slabs_.size()); ++i) {
    if (slabs_[i].base != nullptr) munmap(slabs_[i].base, slab_bytes_);
  }
  slabs_.clear();
  non_full_.clear();
  live_blocks_ = 0;
  peak_live_blocks_ = 0;
  mapped_slabs_ = 0;
  empty_slabs_ = 0;
}

void BlockPool::CopyFrom(const BlockPool& other) {
  QEVICT_CHECK(other.block_bytes_ == block_bytes_ && other.blocks_per_slab_ == blocks_per_slab_);
  Reset();
  slabs_.resize(other.slabs_.size());
  for (size_t i = 0; i < other.slabs_.size(); ++i) {
    const Slab& from = other.slabs_[i];
    if (from.base == nullptr) continue;
    void* base = mmap(nullptr, slab_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (base == MAP_FAILED) {
      Reset();
      throw Error("KV cache: cannot map " + std::to_string(slab_bytes_) + " bytes: " +
                  std::strerror(errno));
    }
    slabs_[i].base = static_cast<uint8_t*>(base);
    std::memcpy(slabs_[i].base, from.base, slab_bytes_);
    slabs_[i].free_slots = from.free_slots;
  }
  non_full_ = other.non_full_;
  live_blocks_ = other.live_blocks_;
  peak_live_blocks_ = other.peak_live_blocks_;
  mapped_slabs_ = other.mapped_slabs_;
  empty_slabs_ = other.empty_slabs_;
}

void BlockPool::SetNonFull(int index, bool non_full) {
  const size_t word = static_cast<size_t>(index) / 64;
  if (non_full_.size() <= word) non_full_.resize(word + 1, 0);
  const uint64_t bit = uint64_t{1} << (index % 64);
  non_full_[word] = non_full ? (non_full_[word] | bit) : (non_full_[word] & ~bit);
}

int BlockPool::FirstNonFull() const {
  for (size_t w = 0; w < non_full_.size(); ++w) {
    if (non_full_[w] != 0) return static_cast<int>(w * 64 + std::countr_zero(non_full_[w]));
  }
  return -1;
}

int BlockPool::NewSlab() {
  void* base = mmap(nullptr, slab_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
  if (base == MAP_FAILED) {
    throw Error("KV cache: cannot map " + std::to_string(slab_bytes_) + " bytes: " +
                std::strerror(errno));
  }
  int index = -1;
  for (int i = 0; i < static_cast<int>(slabs_.size()); ++i) {
    if (slabs_[i].base == nullptr) {
      index = i;
      break;
    }
  }
  if (index < 0) {
    QEVICT_CHECK(slabs_.size() < (size_t{1} << (32 - slab_shift_)) - 1);
    index = static_cast<int>(slabs_.size());
    slabs_.emplace_back();
  }
  Slab& slab = slabs_[index];
  slab.base = static_cast<uint8_t*>(base);
  slab.free_slots.resize(blocks_per_slab_);
  // Pop order 0, 1, 2, ...: blocks are handed out from the start of the slab.
  for (int i = 0; i < blocks_per_slab_; ++i) {
    slab.free_slots[i] = static_cast<uint16_t>(blocks_per_slab_ - 1 - i);
  }
  ++mapped_slabs_;
  ++empty_slabs_;
  SetNonFull(index, true);
  return index;
}

void BlockPool::ReleaseSlab(int index) {
  Slab& slab = slabs_[index];
  munmap(slab.base, slab_bytes_);
  slab.base = nullptr;
  slab.free_slots.clear();
  slab.free_slots.shrink_to_fit();
  SetNonFull(index, false);
  --mapped_slabs_;
  --empty_slabs_;
}

uint32_t BlockPool::Allocate() {
  int index = FirstNonFull();
  if (index < 0) index = NewSlab();
  Slab& slab = slabs_[index];
  if (static_cast<int>(slab.free_slots.size()) == blocks_per_slab_) --empty_slabs_;
  const uint16_t slot = slab.free_slots.back();
  slab.free_slots.pop_back();
  if (slab.free_slots.empty()) SetNonFull(index, false);
  ++live_blocks_;
  peak_live_blocks_ = std::max(peak_live_blocks_, live_blocks_);
  return (static_cast<uint32_t>(index) << slab_shift_) | slot;
}

void BlockPool::Free(uint32_t handle) {
  const int index = static_cast<int>(handle >> slab_shift_);
  QEVICT_CHECK(index < static_cast<int>(slabs_.size()) && slabs_[index].base != nullptr);
  Slab& slab = slabs_[index];
  QEVICT_CHECK(static_cast<int>(slab.free_slots.size()) < blocks_per_slab_);
  slab.free_slots.push_back(static_cast<uint16_t>(handle & (blocks_per_slab_ - 1)));
  SetNonFull(index, true);
  --live_blocks_;
  if (static_cast<int>(slab.free_slots.size()) == blocks_per_slab_) {
    ++empty_slabs_;
    if (empty_slabs_ > 1) ReleaseSlab(index);
  }
}

int64_t BlockPool::Compact(const std::function<void(uint32_t from, uint32_t to)>& relocate) {
  // Mapped slabs, fullest first (lowest index among equals, so the result is deterministic).
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(slabs_.size()); ++i) {
    if (slabs_[i].base != nullptr) order.push_back(i);
  }
  auto live_in = [&](int i) {
    return blocks_per_slab_ - static_cast<int>(slabs_[i].free_slots.size());
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return live_in(a) > live_in(b); });
  const size_t keep = static_cast<size_t>(MinimumSlabs());
  int64_t moved = 0;
  size_t target = 0;  // the kept slab receiving blocks
  std::vector<bool> is_free(blocks_per_slab_);
  for (size_t s = keep; s < order.size(); ++s) {
    const int from_index = order[s];
    Slab& from = slabs_[from_index];
    if (static_cast<int>(from.free_slots.size()) == blocks_per_slab_) continue;
    std::fill(is_free.begin(), is_free.end(), false);
    for (uint16_t slot : from.free_slots) is_free[slot] = true;
    for (int slot = 0; slot < blocks_per_slab_; ++slot) {
      if (is_free[slot]) continue;
      while (slabs_[order[target]].free_slots.empty()) ++target;  // kept slabs have the room
      QEVICT_CHECK(target < keep);
      const int to_index = order[target];
      Slab& to = slabs_[to_index];
      const uint16_t to_slot = to.free_slots.back();
      to.free_slots.pop_back();
      if (to.free_slots.empty()) SetNonFull(to_index, false);
      std::memcpy(to.base + int64_t{to_slot} * block_bytes_,
                  from.base + int64_t{slot} * block_bytes_, block_bytes_);
      from.free_slots.push_back(static_cast<uint16_t>(slot));
      relocate((static_cast<uint32_t>(from_index) << slab_shift_) | static_cast<uint32_t>(slot),
               (static_cast<uint32_t>(to_index) << slab_shift_) | to_slot);
      ++moved;
    }
    SetNonFull(from_index, true);
    ++empty_slabs_;
  }
  for (size_t s = keep; s < order.size(); ++s) {
    if (static_cast<int>(slabs_[order[s]].free_slots.size()) == blocks_per_slab_) ReleaseSlab(order[s]);
  }
  return moved;
}

int64_t BlockPool::CountLiveBlocks() const {
  int64_t live = 0;
  for (const Slab& slab : slabs_) {
    if (slab.base != nullptr) live += blocks_per_slab_ - static_cast<int64_t>(slab.free_slots.size());
  }
  return live;
}

}  // namespace qevict
