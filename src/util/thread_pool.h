// A fixed team of threads for data-parallel kernels. The calling thread is member 0, so a pool of
// N threads starts N-1 workers. Workers spin briefly between jobs (a decode step issues a few
// hundred small parallel regions; waking sleeping threads each time would cost more than the
// work) and then sleep on an atomic wait. One job runs at a time; concurrent callers serialize.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qevict {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index) once on every member, 0 being the caller; returns when all are done.
  void RunOnAll(const std::function<void(int)>& fn);

  // Calls fn(begin, end) over [0, n) in chunks of at least `grain` items, handed out dynamically.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Number of hardware threads available to this process (affinity-aware), at least 1.
  static int HardwareThreads();

 private:
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace qevict
