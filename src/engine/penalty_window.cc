#include "engine/penalty_window.h"

namespace qevict {

PenaltyWindow::PenaltyWindow(int last_n) : last_n_(last_n) {
  if (last_n_ > 0) ring_.reserve(static_cast<size_t>(last_n_));
}

void PenaltyWindow::Push(int32_t token) {
  if (last_n_ == 0) return;
  ++counts_[token];
  if (last_n_ < 0) {
    ++total_;
    return;
  }
  if (ring_.size() < static_cast<size_t>(last_n_)) {
    ring_.push_back(token);
    return;
  }
  const int32_t oldest = ring_[next_];
  if (--counts_[oldest] == 0) counts_.erase(oldest);
  ring_[next_] = token;
  next_ = (next_ + 1) % ring_.size();
}

void PenaltyWindow::PushAll(std::span<const int32_t> tokens) {
  if (last_n_ > 0 && tokens.size() > static_cast<size_t>(last_n_)) {
    tokens = tokens.last(static_cast<size_t>(last_n_));
  }
  for (int32_t token : tokens) Push(token);
}

size_t PenaltyWindow::size() const { return last_n_ < 0 ? total_ : ring_.size(); }

}  // namespace qevict
