// A fixed team of threads for data-parallel kernels. The calling thread takes part, so a pool of
// N threads starts N-1 workers. Workers spin briefly between jobs (a decode step issues a few
// hundred small parallel regions; waking sleeping threads each time would cost more than the
// work) and then sleep on an atomic wait.
//
// ParallelFor hands out chunks dynamically and returns as soon as every chunk is done: a worker
// that has not woken up yet (descheduled on a busy machine) is not waited for, its share is
// simply taken by whoever is running. One job runs at a time; concurrent callers serialize.
//
// A chunk that throws (a cold-store read or write that fails inside a parallel routing step)
// does not end its thread: the first exception is kept, the chunks not yet started are
// skipped, and ParallelFor rethrows it on the caller's thread once every running chunk is done.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace qevict {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) over [0, n) in chunks of at least `grain` items. fn may run on any
  // thread, several chunks per thread; it must not call back into the same pool. If fn throws,
  // the chunks not yet started are skipped and the first exception is rethrown here after the
  // others finish.
  template <class Fn>
  void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    Run(n, grain, [](void* ctx, int64_t b, int64_t e) { (*static_cast<F*>(ctx))(b, e); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Number of hardware threads available to this process (affinity-aware), at least 1.
  static int HardwareThreads();

 private:
  using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
  void Run(int64_t n, int64_t grain, ChunkFn fn, void* ctx);
  void WorkerLoop();
  // Claims and runs chunks of the current job until none is left.
  void Work();
  void RunChunk(int64_t begin, int64_t end);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;

  // The current job. generation_ works as a sequence lock: odd while the caller rewrites the
  // job (after waiting until no worker is inside Work()), even once it is published. A worker
  // registers in active_ and then re-checks the generation, so it either runs the published
  // job or backs off; a late worker of a finished job finds no chunk left to claim.
  ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  int64_t n_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int64_t> done_chunks_{0};
  std::atomic<int> active_{0};  // workers inside Work()
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  // The current job's first exception; once failed_ is set, unstarted chunks are skipped.
  std::atomic<bool> failed_{false};
  std::mutex failure_mutex_;
  std::exception_ptr failure_;
};

}  // namespace qevict
