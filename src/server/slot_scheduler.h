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

// Memory held outside running requests that counts against --kv-memory-limit and can be given
// back on demand: the server's kept conversations (server/session_store.h). Called with the
// scheduler's lock held; must not call back into the scheduler.
class HeldMemory {
 public:
  virtual ~HeldMemory() = default;
  virtual int64_t held_bytes() const = 0;
  // Frees held memory until at least `bytes` are freed or nothing more can be; returns the
  // bytes freed.
  virtual int64_t Release(int64_t bytes) = 0;
};

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
  int64_t reserved_bytes = 0;  // running requests' reservations
  int64_t held_bytes = 0;      // kept conversations (HeldMemory)
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
  // Releases the lease after running `handover` under the scheduler's lock, so that memory
  // handed to the HeldMemory (a kept conversation) and the reservation it leaves change in one
  // step: no admission decision or snapshot sees both, or neither.
  void ReleaseWith(const std::function<void()>& handover);

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
  // for the too-large message (see DescribeKvRequest). Held memory is reclaimed when the
  // request would otherwise wait for KV memory; `credit` bytes of it are the request's own (the
  // kept conversation it continues, which its reservation covers once it runs). `on_admit`
  // runs under the scheduler's lock as the reservation is made, so that the credit leaves the
  // held memory in the same step (no snapshot counts those bytes twice).
  std::variant<SlotLease, ApiError> Acquire(int64_t kv_bytes, const std::string& what,
                                            int64_t credit = 0,
                                            const std::function<void()>& on_admit = nullptr);

  // Memory outside the leases that counts against the limit (set once, before any Acquire).
  void set_held_memory(HeldMemory* held) { held_ = held; }

  // Wakes every waiter with 503 and refuses new requests; leases already held stay valid.
  void Shutdown();
  bool shutting_down() const;

  SchedulerSnapshot Snapshot() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  friend class SlotLease;
  void Release(int slot, int64_t bytes, const std::function<void()>& handover = nullptr);
  bool CanStart(uint64_t ticket, int64_t kv_bytes, int64_t credit);  // with mutex_ held
  bool FitsMemory(int64_t kv_bytes, int64_t credit, bool reclaim);   // with mutex_ held
  int FreeSlot() const;                                    // with mutex_ held

  SchedulerOptions options_;
  std::vector<std::unique_ptr<SlotWorker>> workers_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> busy_;
  std::deque<uint64_t> queue_;  // tickets of waiting requests, oldest first
  uint64_t next_ticket_ = 0;
  int64_t reserved_bytes_ = 0;
  HeldMemory* held_ = nullptr;
  bool shutting_down_ = false;
};

}  // namespace qevict::server
