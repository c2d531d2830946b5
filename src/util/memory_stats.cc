#include "util/memory_stats.h"

#include <cstdio>
#include <cstring>

namespace qevict {
namespace {

// Parses "Name:   1234 kB" lines; returns true when `line` starts with `key`.
bool ParseKb(const char* line, const char* key, int64_t* bytes) {
  const size_t n = std::strlen(key);
  if (std::strncmp(line, key, n) != 0) return false;
  long long kb = 0;
  if (std::sscanf(line + n, " %lld", &kb) == 1) *bytes = static_cast<int64_t>(kb) * 1024;
  return true;
}

}  // namespace

MemoryStats ReadMemoryStats() {
  MemoryStats s;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return s;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    ParseKb(line, "VmRSS:", &s.rss_bytes) || ParseKb(line, "VmHWM:", &s.peak_rss_bytes) ||
        ParseKb(line, "RssAnon:", &s.rss_anon_bytes) ||
        ParseKb(line, "RssFile:", &s.rss_file_bytes);
  }
  std::fclose(f);
  return s;
}

bool ResetPeakRss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace qevict

namespace qevict {

int64_t AvailableMemoryBytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t available_kb = -1, swap_free_kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    long long kb = 0;
    if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) available_kb = kb;
    if (std::sscanf(line, "SwapFree: %lld kB", &kb) == 1) swap_free_kb = kb;
  }
  std::fclose(f);
  return available_kb < 0 ? -1 : (available_kb + swap_free_kb) * 1024;
}

}  // namespace qevict
