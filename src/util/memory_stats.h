// Resident memory of this process as the kernel accounts it (/proc/self/status). Weights are
// mmap'd, so they show up as file-backed pages (RssFile); the KV cache and scratch are anonymous
// memory (RssAnon).
#pragma once

#include <cstdint>

namespace qevict {

struct MemoryStats {
  int64_t rss_bytes = 0;       // VmRSS: resident now
  int64_t peak_rss_bytes = 0;  // VmHWM: high-water mark since start (or the last reset)
  int64_t rss_anon_bytes = 0;  // RssAnon: heap, KV cache, scratch
  int64_t rss_file_bytes = 0;  // RssFile: mapped files (the model's weights)
};

// Fields the kernel does not report stay 0 (e.g. on systems without /proc).
MemoryStats ReadMemoryStats();

// Resets VmHWM to the current RSS (writes "5" to /proc/self/clear_refs) so that a later
// ReadMemoryStats() reports the peak of what ran in between. Returns false when not permitted;
// the high-water mark then keeps counting from the process start.
bool ResetPeakRss();

// Memory the kernel reports as available to new allocations (MemAvailable + free swap), or -1
// when it cannot be read. Used to refuse a context the machine cannot hold before allocating.
int64_t AvailableMemoryBytes();

}  // namespace qevict
