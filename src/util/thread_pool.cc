#include "util/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define QEVICT_PAUSE() _mm_pause()
#else
#define QEVICT_PAUSE() ((void)0)
#endif

namespace qevict {
namespace {
// Pauses before sleeping: 1.6-1.8 ms on the AMD EPYC of docs/benchmarks.md (a PAUSE is about
// 25 ns there; it is 5-40 ns elsewhere), longer than most gaps between a decode step's regions.
constexpr int kSpinIterations = 1 << 16;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::HardwareThreads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::Work() {
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1);
    if (c >= n_chunks_) return;
    const int64_t begin = c * chunk_;
    if (!failed_.load()) RunChunk(begin, std::min(n_, begin + chunk_));
    done_chunks_.fetch_add(1);
  }
}

// An exception must not leave a worker's thread (std::terminate) nor the caller's before every
// chunk is done (the job's context lives on the caller's stack): it is kept for Run to rethrow.
void ThreadPool::RunChunk(int64_t begin, int64_t end) {
  try {
    fn_(ctx_, begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (!failure_) failure_ = std::current_exception();
    failed_.store(true);
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load();
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      QEVICT_PAUSE();
      gen = generation_.load();
    }
    while (gen == seen) {
      generation_.wait(seen);
      gen = generation_.load();
    }
    seen = gen;
    if (stop_.load()) return;
    if (gen & 1) continue;  // a job is being written; wait for it to be published
    // Register, then confirm the job is still the one that woke us: the caller waits for
    // registered workers only, and a worker that registered late for a finished job finds no
    // chunk left (or, if a new job started, takes part in that one while registered).
    active_.fetch_add(1);
    if (generation_.load() == gen) Work();
    active_.fetch_sub(1);
  }
}

void ThreadPool::Run(int64_t n, int64_t grain, ChunkFn fn, void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    fn(ctx, 0, n);
    return;
  }
  std::lock_guard<std::mutex> lock(run_mutex_);
  generation_.fetch_add(1);  // odd: workers that wake now back off
  while (active_.load() != 0) QEVICT_PAUSE();  // stragglers of the previous job leave
  // About four chunks per thread balances load without much contention on the counter.
  chunk_ = std::max(grain, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  n_chunks_ = (n + chunk_ - 1) / chunk_;
  done_chunks_.store(0);
  failed_.store(false);
  failure_ = nullptr;
  next_chunk_.store(0);
  generation_.fetch_add(1);  // even: published
  generation_.notify_all();
  Work();
  while (done_chunks_.load() != n_chunks_) QEVICT_PAUSE();
  if (failed_.load()) {
    std::exception_ptr failure;
    {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      failure = std::exchange(failure_, nullptr);
    }
    std::rethrow_exception(failure);
  }
}

}  // namespace qevict
