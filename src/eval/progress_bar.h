// A progress bar with ETA on stderr: redrawn in place on a terminal, a plain line every few
// percent otherwise (logs, CI).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace qevict {

class ProgressBar {
 public:
  explicit ProgressBar(double total_work, bool enabled = true);
  // Adds done work and redraws with `label` (what is running now).
  void Advance(double work, const std::string& label);
  void Finish();

 private:
  void Draw(const std::string& label, bool final);

  double total_, done_ = 0.0;
  bool enabled_, tty_;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point start_;
};

std::string FormatDuration(double seconds);  // "1h02m", "4m05s", "12s"

}  // namespace qevict
