// Server counters and gauges, rendered in the Prometheus text format at GET /metrics. Slots
// publish their cache's KvStats while they generate (from the generating thread, between
// tokens), so a scrape never touches a cache that is being written.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kv/kv_cache.h"
#include "server/session_store.h"
#include "server/slot_scheduler.h"
#include "util/memory_stats.h"

namespace qevict::server {

class ServerMetrics {
 public:
  explicit ServerMetrics(int slots);

  // Every HTTP response, by route ("other" for unknown paths) and status.
  void CountResponse(const std::string& route, int status);
  void CountCancelled();  // a client went away mid-stream

  // A slot's run: started, progressing (tokens generated so far and the cache's statistics),
  // finished (its last statistics join the totals; its resident bytes leave the gauges).
  void SlotStarted(int slot, int64_t prompt_tokens);
  void SlotProgress(int slot, int64_t generated_tokens, const KvStats& stats);
  void SlotFinished(int slot, int64_t generated_tokens, double decode_seconds,
                    const KvStats& stats);

  std::string RenderPrometheus(const SchedulerSnapshot& scheduler, const MemoryStats& memory,
                               const SessionStoreSnapshot& sessions = {}) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct SlotState {
    bool active = false;
    int64_t generated = 0;  // tokens already added to tokens_generated_
    KvStats kv;
  };
  struct Completed {
    int64_t tokens;
    double seconds;
  };
  void AddTokens(int64_t n, Clock::time_point now);      // with mutex_ held
  double RecentThroughput(Clock::time_point now) const;  // with mutex_ held

  mutable std::mutex mutex_;
  std::vector<SlotState> slots_;
  std::map<std::pair<std::string, int>, int64_t> responses_;
  int64_t cancelled_ = 0;
  int64_t runs_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t tokens_generated_ = 0;
  int64_t promotions_ = 0, demotions_ = 0, evictions_ = 0;  // of finished runs
  std::deque<Completed> recent_runs_;  // decode speed of the last completed runs
  // Tokens generated per second of wall time, for the last kWindowSeconds seconds.
  static constexpr int kWindowSeconds = 10;
  std::deque<std::pair<int64_t, int64_t>> token_seconds_;  // (second since start, tokens)
  Clock::time_point start_ = Clock::now();
};

}  // namespace qevict::server
