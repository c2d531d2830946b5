#include "server/metrics.h"

#include <algorithm>
#include <sstream>

#include "kv/disk_cold_store.h"

namespace qevict::server {
namespace {

constexpr size_t kRecentRuns = 16;

class PrometheusWriter {
 public:
  void Header(const char* name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  template <class T>
  void Sample(const char* name, T value, const std::string& labels = "") {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << value << '\n';
  }
  template <class T>
  void Metric(const char* name, const char* type, const char* help, T value) {
    Header(name, type, help);
    Sample(name, value);
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace

ServerMetrics::ServerMetrics(int slots) : slots_(static_cast<size_t>(std::max(1, slots))) {}

void ServerMetrics::CountResponse(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++responses_[{route, status}];
}

void ServerMetrics::CountCancelled() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++cancelled_;
}

void ServerMetrics::SlotStarted(int slot, int64_t prompt_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_[slot] = SlotState{};
  slots_[slot].active = true;
  ++runs_;
  prompt_tokens_ += prompt_tokens;
}

void ServerMetrics::AddTokens(int64_t n, Clock::time_point now) {
  if (n <= 0) return;
  tokens_generated_ += n;
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
  if (token_seconds_.empty() || token_seconds_.back().first != second) {
    token_seconds_.emplace_back(second, 0);
  }
  token_seconds_.back().second += n;
  while (!token_seconds_.empty() && token_seconds_.front().first <= second - kWindowSeconds) {
    token_seconds_.pop_front();
  }
}

double ServerMetrics::RecentThroughput(Clock::time_point now) const {
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
  int64_t tokens = 0;
  for (const auto& [s, n] : token_seconds_) {
    if (s > second - kWindowSeconds) tokens += n;
  }
  // Over the window, or over the time since start when that is shorter.
  const double span = std::min<double>(
      kWindowSeconds, std::max(1.0, std::chrono::duration<double>(now - start_).count()));
  return static_cast<double>(tokens) / span;
}

void ServerMetrics::SlotProgress(int slot, int64_t generated_tokens, const KvStats& stats) {
  std::lock_guard<std::mutex> lock(mutex_);
  SlotState& s = slots_[slot];
  AddTokens(generated_tokens - s.generated, Clock::now());
  s.generated = std::max(s.generated, generated_tokens);
  s.kv = stats;
}

void ServerMetrics::SlotFinished(int slot, int64_t generated_tokens, double decode_seconds,
                                 const KvStats& stats) {
  std::lock_guard<std::mutex> lock(mutex_);
  SlotState& s = slots_[slot];
  AddTokens(generated_tokens - s.generated, Clock::now());
  promotions_ += stats.promotions;
  demotions_ += stats.demotions;
  evictions_ += stats.evictions;
  if (generated_tokens > 0 && decode_seconds > 0.0) {
    recent_runs_.push_back({generated_tokens, decode_seconds});
    if (recent_runs_.size() > kRecentRuns) recent_runs_.pop_front();
  }
  s = SlotState{};
}

std::string ServerMetrics::RenderPrometheus(const SchedulerSnapshot& sched,
                                            const MemoryStats& memory,
                                            const SessionStoreSnapshot& sessions) const {
  std::lock_guard<std::mutex> lock(mutex_);
  PrometheusWriter w;
  w.Header("qevict_requests_total", "counter", "HTTP responses by route and status code.");
  for (const auto& [key, count] : responses_) {
    w.Sample("qevict_requests_total", count,
             "route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"");
  }
  w.Metric("qevict_requests_cancelled_total", "counter",
           "Generations stopped because the client disconnected.", cancelled_);
  w.Metric("qevict_generations_total", "counter", "Generations started on a slot.", runs_);
  w.Metric("qevict_prompt_tokens_total", "counter", "Prompt tokens prefilled.", prompt_tokens_);
  w.Metric("qevict_tokens_generated_total", "counter", "Tokens generated.", tokens_generated_);

  const Clock::time_point now = Clock::now();
  w.Metric("qevict_tokens_per_second", "gauge",
           "Tokens generated per second over all slots, over the last 10 s.",
           RecentThroughput(now));
  int64_t recent_tokens = 0;
  double recent_seconds = 0.0;
  for (const Completed& c : recent_runs_) {
    recent_tokens += c.tokens;
    recent_seconds += c.seconds;
  }
  w.Metric("qevict_decode_tokens_per_second", "gauge",
           "Decode speed of one request, over the last 16 completed requests.",
           recent_seconds > 0.0 ? static_cast<double>(recent_tokens) / recent_seconds : 0.0);

  KvStats sum;
  int64_t promotions = promotions_, demotions = demotions_, evictions = evictions_;
  for (const SlotState& s : slots_) {
    if (!s.active) continue;
    sum.fp16_bytes += s.kv.fp16_bytes;
    sum.quant_bytes += s.kv.quant_bytes;
    sum.meta_bytes += s.kv.meta_bytes;
    sum.cold_bytes += s.kv.cold_bytes;
    sum.cold_page_cache_bytes += std::max<int64_t>(0, s.kv.cold_page_cache_bytes);
    sum.reserved_bytes += s.kv.reserved_bytes;
    promotions += s.kv.promotions;
    demotions += s.kv.demotions;
    evictions += s.kv.evictions;
  }
  w.Header("qevict_kv_resident_bytes", "gauge",
           "KV cache bytes held now, summed over active sessions, by tier (cold: on disk, the "
           "exact-recovery store or the cold tier, outside the budget).");
  w.Sample("qevict_kv_resident_bytes", sum.fp16_bytes, "tier=\"fp16\"");
  w.Sample("qevict_kv_resident_bytes", sum.quant_bytes, "tier=\"quant\"");
  w.Sample("qevict_kv_resident_bytes", sum.meta_bytes, "tier=\"meta\"");
  w.Sample("qevict_kv_resident_bytes", sum.cold_bytes, "tier=\"cold\"");
  w.Metric("qevict_kv_cold_page_cache_bytes", "gauge",
           "Of the cold bytes on disk, what the OS page cache holds now (the kernel's to take "
           "back; in no process's RSS, never counted as resident).",
           sum.cold_page_cache_bytes);
  w.Metric("qevict_kv_cold_disk_bytes", "gauge",
           "Bytes every cold file of the server holds on disk now, kept conversations included.",
           DiskColdStore::ProcessLiveBytes());
  w.Metric("qevict_kv_cold_disk_total_bytes", "gauge",
           "--kv-cold-disk-total (0: no limit but each session's --kv-cold-disk-limit).",
           std::max<int64_t>(0, DiskColdStore::ProcessDiskLimit()));
  w.Metric("qevict_kv_mapped_bytes", "gauge",
           "KV bytes the active sessions' caches hold from the OS now (pool slabs and policy "
           "buffers; >= the resident bytes).", sum.reserved_bytes);
  w.Metric("qevict_kv_reserved_bytes", "gauge",
           "KV bytes reserved by admission control for running requests (the most each "
           "request's cache can hold mapped).", sched.reserved_bytes);
  w.Metric("qevict_kv_memory_limit_bytes", "gauge",
           "--kv-memory-limit (0: no limit beyond the slots).", sched.kv_memory_limit);
  w.Metric("qevict_sessions_kept", "gauge",
           "Conversations kept for reuse (docs/server.md, \"Kept sessions\").", sessions.sessions);
  w.Metric("qevict_sessions_kept_bytes", "gauge",
           "KV bytes the kept conversations hold from the OS (counted in --kv-memory-limit "
           "with qevict_kv_reserved_bytes; the two are read in one step).",
           sched.held_bytes);
  w.Metric("qevict_session_hits_total", "counter",
           "Requests that continued a kept conversation.", sessions.hits);
  w.Metric("qevict_session_misses_total", "counter",
           "Requests with no kept conversation to continue (prefilled from the start).",
           sessions.misses);
  w.Metric("qevict_session_reused_tokens_total", "counter",
           "Prompt tokens not prefilled again because a kept conversation held them.",
           sessions.reused_tokens);
  w.Header("qevict_sessions_dropped_total", "counter",
           "Kept conversations dropped, by reason (lru: over --max-sessions; ttl: idle longer "
           "than --session-ttl; memory: room for a request under --kv-memory-limit; cold_disk: room "
           "for a running request's cold tier under --kv-cold-disk-total; diverged: a "
           "named conversation whose next prompt did not extend it, or that was replaced).");
  w.Sample("qevict_sessions_dropped_total", sessions.dropped_lru, "reason=\"lru\"");
  w.Sample("qevict_sessions_dropped_total", sessions.dropped_ttl, "reason=\"ttl\"");
  w.Sample("qevict_sessions_dropped_total", sessions.dropped_memory, "reason=\"memory\"");
  w.Sample("qevict_sessions_dropped_total", sessions.dropped_cold_disk, "reason=\"cold_disk\"");
  w.Sample("qevict_sessions_dropped_total", sessions.dropped_diverged, "reason=\"diverged\"");
  w.Metric("qevict_kv_promotions_total", "counter", "Windows promoted back to fp16.", promotions);
  w.Metric("qevict_kv_demotions_total", "counter", "Windows demoted to the quantized tier.",
           demotions);
  w.Metric("qevict_kv_evictions_total", "counter", "Windows evicted.", evictions);
  w.Metric("qevict_queue_length", "gauge", "Requests waiting for a slot.", sched.queued);
  w.Metric("qevict_slots_active", "gauge", "Slots generating now.", sched.active);
  w.Metric("qevict_slots_total", "gauge", "Slots (concurrent generations).", sched.slots);
  w.Metric("qevict_process_resident_memory_bytes", "gauge",
           "Resident memory of the server process (VmRSS).", memory.rss_bytes);
  w.Metric("qevict_process_anonymous_memory_bytes", "gauge",
           "Anonymous resident memory (RssAnon: heap, KV caches, scratch).", memory.rss_anon_bytes);
  return w.str();
}

}  // namespace qevict::server
