#include "util/bandwidth.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "util/cpu_features.h"
#include "util/error.h"

namespace qevict {
namespace {

constexpr size_t kAlign = size_t{2} << 20;  // 2 MiB: lets the kernel back it with huge pages
constexpr size_t kSliceAlign = 4096;

volatile uint64_t g_sink;  // keeps the sums observable

// An anonymous mapping, unmapped on scope exit.
class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw Error("cannot allocate " + std::to_string(bytes_ >> 20) +
                  " MiB for the bandwidth measurement");
    }
#ifdef MADV_HUGEPAGE
    madvise(p, bytes_, MADV_HUGEPAGE);
#endif
    data_ = static_cast<uint64_t*>(p);
  }
  ~Buffer() { munmap(data_, bytes_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint64_t* data() const { return data_; }

 private:
  size_t bytes_;
  uint64_t* data_ = nullptr;
};

}  // namespace

namespace bandwidth_internal {

uint64_t SumWordsPortable(const uint64_t* p, size_t n) {
  uint64_t a[8] = {};
  for (size_t i = 0; i < n; i += 16) {
    for (int j = 0; j < 8; ++j) a[j] += p[i + j] + p[i + 8 + j];
  }
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

}  // namespace bandwidth_internal

size_t LastLevelCacheBytes() {
  long best = 0;
#ifdef _SC_LEVEL4_CACHE_SIZE
  best = std::max(best, sysconf(_SC_LEVEL4_CACHE_SIZE));
#endif
#ifdef _SC_LEVEL3_CACHE_SIZE
  best = std::max(best, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  best = std::max(best, sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
  return best > 0 ? static_cast<size_t>(best) : 0;
}

BandwidthResult MeasureReadBandwidth(ThreadPool& pool, size_t buffer_bytes, int passes) {
  const int threads = pool.size();
  // Whole 4 KiB pages per thread, at least one page each.
  const size_t slice = std::max(kSliceAlign, buffer_bytes / threads / kSliceAlign * kSliceAlign);
  const size_t total = slice * threads;
  Buffer buffer((total + kAlign - 1) / kAlign * kAlign);
  const size_t words = slice / sizeof(uint64_t);
  auto slice_of = [&](int t) { return buffer.data() + static_cast<size_t>(t) * words; };

  // First touch by the reading thread (places pages on its NUMA node).
  pool.ParallelFor(threads, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      uint64_t* p = slice_of(static_cast<int>(t));
      for (size_t i = 0; i < words; ++i) p[i] = i ^ static_cast<uint64_t>(t);
    }
  });

#if defined(__x86_64__)
  const auto sum = ActiveSimdLevel() >= SimdLevel::kAvx2 ? bandwidth_internal::SumWordsAvx2
                                                         : bandwidth_internal::SumWordsPortable;
#else  // the compiler vectorises the portable sum for the target (NEON on ARM)
  const auto sum = bandwidth_internal::SumWordsPortable;
#endif
  std::atomic<uint64_t> sink{0};
  std::vector<double> rates;
  for (int pass = 0; pass < std::max(1, passes); ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(threads, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        sink.fetch_add(sum(slice_of(static_cast<int>(t)), words));
      }
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(total) / s / 1e9);
  }
  g_sink = sink.load();
  std::sort(rates.begin(), rates.end());
  BandwidthResult r;
  r.gb_per_s = rates.back();
  r.median_gb_per_s = rates[rates.size() / 2];
  r.buffer_bytes = total;
  r.threads = threads;
  r.passes = static_cast<int>(rates.size());
  return r;
}

}  // namespace qevict
