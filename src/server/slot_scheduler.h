// Admission control: N slots decode concurrently, each on its own thread and ThreadPool; a
// request also reserves the KV bytes its cache can reach (kv_reservation.h) and starts only when
// a slot is free and the reservations of running requests plus its own fit --kv-memory-limit.
// Waiting requests form one FIFO queue of bounded length (first come, first served: a large
// request at the head is not overtaken). Rejections are ApiErrors:
//   * a reservation larger than the whole limit: 400 (it could never run);
//   * the queue is full: 503 "queue_full";
//   * waited longer than the queue timeout: 503 "queue_timeout";
//   * the server is shutting down: 503 "shutting_down".
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/slot_worker.h"

namespace qevict::server {

struct SchedulerOptions {
  int slots = 1;
  int threads_per_slot = 1;
  int64_t kv_memory_limit = 0;  // bytes; 0 = no limit beyond the slots
  int max_queue = 32;           // requests that may wait for a slot
  std::chrono::milliseconds queue_timeout{std::chrono::minutes(10)};
};

struct SchedulerSnapshot {
  int slots = 0;
  int active = 0;
  int queued = 0;
  int64_t reserved_bytes = 0;
  int64_t kv_memory_limit = 0;
};

class SlotScheduler;

// A running request's hold on a slot and its reserved bytes; released on destruction.
class SlotLease {
 public:
  SlotLease() = default;
  SlotLease(SlotLease&& other) noexcept;
  SlotLease& operator=(SlotLease&& other) noexcept;
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  ~SlotLease();

  bool valid() const { return scheduler_ != nullptr; }
  int slot() const { return slot_; }
  int64_t reserved_bytes() const { return bytes_; }
  ThreadPool& pool() const;  // for use inside Run only
  // Runs task on the slot's thread (see SlotWorker::Run).
  void Run(const std::function<void()>& task) const;
  // True once the server is shutting down: generation should stop.
  bool cancelled() const;

 private:
  friend class SlotScheduler;
  SlotLease(SlotScheduler* scheduler, int slot, int64_t bytes)
      : scheduler_(scheduler), slot_(slot), bytes_(bytes) {}
  void Release();

  SlotScheduler* scheduler_ = nullptr;
  int slot_ = -1;
  int64_t bytes_ = 0;
};

class SlotScheduler {
 public:
  explicit SlotScheduler(const SchedulerOptions& options);
  ~SlotScheduler();

  // Blocks until the request may run, or returns why it may not. `what` describes the request
  // for the too-large message (see DescribeKvRequest).
  std::variant<SlotLease, ApiError> Acquire(int64_t kv_bytes, const std::string& what);

  // Wakes every waiter with 503 and refuses new requests; leases already held stay valid.
  void Shutdown();
  bool shutting_down() const;

  SchedulerSnapshot Snapshot() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  friend class SlotLease;
  void Release(int slot, int64_t bytes);
  bool CanStart(uint64_t ticket, int64_t kv_bytes) const;  // with mutex_ held
  int FreeSlot() const;                                    // with mutex_ held

  SchedulerOptions options_;
  std::vector<std::unique_ptr<SlotWorker>> workers_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> busy_;
  std::deque<uint64_t> queue_;  // tickets of waiting requests, oldest first
  uint64_t next_ticket_ = 0;
  int64_t reserved_bytes_ = 0;
  bool shutting_down_ = false;
};

}  // namespace qevict::server
