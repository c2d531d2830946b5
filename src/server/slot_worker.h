// The thread a slot computes on. Every generation of the slot runs here (the connection thread
// that asked waits), so per-thread state that grows with use -- thread_local kernel buffers,
// malloc arenas -- exists once per slot instead of once per connection thread that ever served
// a request. The slot's ThreadPool is driven from this thread (it takes part in the work).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "util/thread_pool.h"

namespace qevict::server {

class SlotWorker {
 public:
  explicit SlotWorker(int threads);  // threads of the pool, this thread included
  ~SlotWorker();                     // finishes the task running, if any, and joins
  SlotWorker(const SlotWorker&) = delete;
  SlotWorker& operator=(const SlotWorker&) = delete;

  // Runs task on the worker thread and returns when it is done; an exception it throws is
  // rethrown here. One caller at a time (the slot's lease holder).
  void Run(const std::function<void()>& task);

  ThreadPool& pool() { return pool_; }

 private:
  void Loop();

  ThreadPool pool_;
  std::mutex mutex_;
  std::condition_variable changed_;
  const std::function<void()>* task_ = nullptr;  // set while a task is pending or running
  bool done_ = false;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace qevict::server
