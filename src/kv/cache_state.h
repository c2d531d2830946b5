// Pieces of the KV caches' saved state (KvCache::SaveState) that more than one cache writes:
// the counters of KvStats, and the check that a run's positions are 0, 1, ... n-1.
#pragma once

#include <cstdint>
#include <span>

#include "kv/kv_cache.h"

namespace qevict {

void SaveKvStats(const KvStats& stats, ByteWriter& out);
KvStats LoadKvStats(ByteReader& in);

// Throws Error unless positions[i] == i (what a saved cache requires; only its count is saved).
void CheckSessionPositions(std::span<const int32_t> positions);

// The version tag every cache's state starts with; LoadState refuses another.
void SaveStateTag(uint32_t tag, ByteWriter& out);
void LoadStateTag(uint32_t tag, const char* cache, ByteReader& in);

}  // namespace qevict
