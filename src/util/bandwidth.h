// Sustained memory read bandwidth of this machine, measured with the threads that will run the
// model: the limit a memory-bound decode step can reach (bytes read per token / bandwidth).
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/thread_pool.h"

namespace qevict {

struct BandwidthResult {
  double gb_per_s = 0.0;  // best pass, in 10^9 bytes per second
  double median_gb_per_s = 0.0;
  size_t buffer_bytes = 0;  // bytes read per pass
  int threads = 0;
  int passes = 0;
};

// Every member of `pool` sums its own contiguous slice of a `buffer_bytes` buffer (first touched
// by that same thread), `passes` times. To measure DRAM rather than cache, make the buffer
// several times the last-level cache (LastLevelCacheBytes()). Throws qevict::Error when the
// buffer cannot be allocated.
BandwidthResult MeasureReadBandwidth(ThreadPool& pool, size_t buffer_bytes, int passes);

// Size of the largest data cache the OS reports, or 0 when unknown.
size_t LastLevelCacheBytes();

namespace bandwidth_internal {
// Sum of n 64-bit words (n a multiple of 16, p 64-byte aligned): the loop whose speed is read.
uint64_t SumWordsPortable(const uint64_t* p, size_t n);
uint64_t SumWordsAvx2(const uint64_t* p, size_t n);  // bandwidth_avx2.cc
}  // namespace bandwidth_internal

}  // namespace qevict
