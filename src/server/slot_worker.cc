#include "server/slot_worker.h"

#include <utility>

namespace qevict::server {

SlotWorker::SlotWorker(int threads) : pool_(threads), thread_([this] { Loop(); }) {}

SlotWorker::~SlotWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void SlotWorker::Run(const std::function<void()>& task) {
  std::unique_lock<std::mutex> lock(mutex_);
  task_ = &task;
  done_ = false;
  error_ = nullptr;
  changed_.notify_all();
  changed_.wait(lock, [this] { return done_; });
  task_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void SlotWorker::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return stop_ || (task_ != nullptr && !done_); });
    if (task_ == nullptr || done_) return;  // stopping with nothing to do
    const std::function<void()>* task = task_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*task)();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    done_ = true;
    changed_.notify_all();
  }
}

}  // namespace qevict::server
