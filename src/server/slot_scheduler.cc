#include "server/slot_scheduler.h"

#include <algorithm>
#include <utility>

namespace qevict::server {

SlotLease::SlotLease(SlotLease&& other) noexcept
    : scheduler_(std::exchange(other.scheduler_, nullptr)),
      slot_(std::exchange(other.slot_, -1)),
      bytes_(std::exchange(other.bytes_, 0)) {}

SlotLease& SlotLease::operator=(SlotLease&& other) noexcept {
  if (this != &other) {
    Release();
    scheduler_ = std::exchange(other.scheduler_, nullptr);
    slot_ = std::exchange(other.slot_, -1);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

SlotLease::~SlotLease() { Release(); }

void SlotLease::Release() {
  if (scheduler_ != nullptr) {
    scheduler_->Release(slot_, bytes_);
    scheduler_ = nullptr;
  }
}

ThreadPool& SlotLease::pool() const { return scheduler_->workers_[slot_]->pool(); }

void SlotLease::Run(const std::function<void()>& task) const {
  scheduler_->workers_[slot_]->Run(task);
}

bool SlotLease::cancelled() const { return scheduler_->shutting_down(); }

void SlotLease::ReleaseWith(const std::function<void()>& handover) {
  if (scheduler_ != nullptr) {
    scheduler_->Release(slot_, bytes_, handover);
    scheduler_ = nullptr;
  }
}

SlotScheduler::SlotScheduler(const SchedulerOptions& options)
    : options_(options), busy_(static_cast<size_t>(std::max(1, options.slots)), false) {
  options_.slots = std::max(1, options_.slots);
  options_.threads_per_slot = std::max(1, options_.threads_per_slot);
  options_.max_queue = std::max(0, options_.max_queue);
  for (int i = 0; i < options_.slots; ++i) {
    workers_.push_back(std::make_unique<SlotWorker>(options_.threads_per_slot));
  }
}

SlotScheduler::~SlotScheduler() { Shutdown(); }

int SlotScheduler::FreeSlot() const {
  for (size_t i = 0; i < busy_.size(); ++i) {
    if (!busy_[i]) return static_cast<int>(i);
  }
  return -1;
}

bool SlotScheduler::FitsMemory(int64_t kv_bytes, int64_t credit, bool reclaim) {
  if (options_.kv_memory_limit <= 0) return true;
  const int64_t held = held_ != nullptr ? held_->held_bytes() - credit : 0;
  const int64_t excess = reserved_bytes_ + held + kv_bytes - options_.kv_memory_limit;
  if (excess <= 0) return true;
  // Kept conversations give way to a request that can run once they are gone (not to one that
  // would still wait for running requests).
  if (!reclaim || held_ == nullptr || reserved_bytes_ + kv_bytes > options_.kv_memory_limit) {
    return false;
  }
  return held_->Release(excess) >= excess;
}

bool SlotScheduler::CanStart(uint64_t ticket, int64_t kv_bytes, int64_t credit) {
  if (queue_.empty() || queue_.front() != ticket || FreeSlot() < 0) return false;
  return FitsMemory(kv_bytes, credit, /*reclaim=*/true);
}

std::variant<SlotLease, ApiError> SlotScheduler::Acquire(int64_t kv_bytes,
                                                         const std::string& what,
                                                         int64_t credit,
                                                         const std::function<void()>& on_admit) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (shutting_down_) {
    return ServiceUnavailable("the server is shutting down", "shutting_down");
  }
  if (options_.kv_memory_limit > 0 && kv_bytes > options_.kv_memory_limit) {
    return InvalidRequest("this request needs " + std::to_string(kv_bytes) +
                              " bytes of KV cache (" + what + ") but --kv-memory-limit is " +
                              std::to_string(options_.kv_memory_limit) +
                              " bytes; lower max_tokens or the prompt, or use a compressing kv "
                              "policy with a smaller budget",
                          "max_tokens", "kv_memory_limit_exceeded");
  }
  // Requests that can start now do not count against the queue length.
  const bool must_wait =
      !queue_.empty() || FreeSlot() < 0 || !FitsMemory(kv_bytes, credit, /*reclaim=*/true);
  if (must_wait && static_cast<int>(queue_.size()) >= options_.max_queue) {
    return ServiceUnavailable("the server is busy: all " + std::to_string(options_.slots) +
                                  " slots are in use and the queue of " +
                                  std::to_string(options_.max_queue) +
                                  " waiting requests is full; retry later",
                              "queue_full");
  }
  const uint64_t ticket = next_ticket_++;
  queue_.push_back(ticket);
  const bool admitted = changed_.wait_for(
      lock, options_.queue_timeout,
      [&] { return shutting_down_ || CanStart(ticket, kv_bytes, credit); });
  if (!admitted || shutting_down_) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    changed_.notify_all();  // the next in line may be able to start now
    if (shutting_down_) return ServiceUnavailable("the server is shutting down", "shutting_down");
    return ServiceUnavailable(
        "timed out after " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::seconds>(options_.queue_timeout).count()) +
            " s waiting for a free slot and KV memory; retry later",
        "queue_timeout");
  }
  queue_.pop_front();
  const int slot = FreeSlot();
  busy_[slot] = true;
  reserved_bytes_ += kv_bytes;
  if (on_admit) on_admit();
  changed_.notify_all();  // the new head of the queue may fit too
  return SlotLease(this, slot, kv_bytes);
}

void SlotScheduler::Release(int slot, int64_t bytes, const std::function<void()>& handover) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (handover) handover();
    busy_[slot] = false;
    reserved_bytes_ -= bytes;
  }
  changed_.notify_all();
}

void SlotScheduler::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutting_down_ = true;
  }
  changed_.notify_all();
}

bool SlotScheduler::shutting_down() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shutting_down_;
}

SchedulerSnapshot SlotScheduler::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SchedulerSnapshot s;
  s.slots = options_.slots;
  s.active = static_cast<int>(std::count(busy_.begin(), busy_.end(), true));
  s.queued = static_cast<int>(queue_.size());
  s.reserved_bytes = reserved_bytes_;
  s.held_bytes = held_ != nullptr ? held_->held_bytes() : 0;
  s.kv_memory_limit = options_.kv_memory_limit;
  return s;
}

}  // namespace qevict::server
