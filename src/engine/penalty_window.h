// The tokens the repetition penalties look at: the last `last_n` tokens of the sequence the
// model has seen (prompt and generated alike, as llama.cpp's penalty sampler keeps them), with
// how often each occurs. Pushing a token updates the counts in O(1): the oldest token leaves
// once the window is full. last_n < 0 keeps every token, 0 none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace qevict {

class PenaltyWindow {
 public:
  explicit PenaltyWindow(int last_n);

  void Push(int32_t token);
  // Pushes the tokens in order, skipping those that would leave the window before the end.
  void PushAll(std::span<const int32_t> tokens);

  // Each token in the window with its number of occurrences there (> 0).
  const std::unordered_map<int32_t, int>& counts() const { return counts_; }
  size_t size() const;  // tokens in the window

 private:
  int last_n_;
  std::vector<int32_t> ring_;  // last_n_ > 0: the window; once full, the oldest is at next_
  size_t next_ = 0;
  size_t total_ = 0;  // last_n_ < 0: every token pushed
  std::unordered_map<int32_t, int> counts_;
};

}  // namespace qevict
