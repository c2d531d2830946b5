#include "eval/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace qevict {

std::string FormatDuration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", s);
  }
  return buf;
}

ProgressBar::ProgressBar(double total_work, bool enabled)
    : total_(std::max(total_work, 1e-9)),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::Advance(double work, const std::string& label) {
  done_ = std::min(total_, done_ + work);
  Draw(label, false);
}

void ProgressBar::Finish() {
  done_ = total_;
  Draw("done", true);
}

void ProgressBar::Draw(const std::string& label, bool final) {
  if (!enabled_) return;
  const double fraction = done_ / total_;
  const int percent = static_cast<int>(fraction * 100.0);
  if (!tty_ && !final && percent / 5 == last_percent_ / 5) return;
  last_percent_ = percent;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string eta =
      fraction > 0.0 ? FormatDuration(elapsed * (1.0 - fraction) / fraction) : "?";
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "%s[%s] %3d%%  %s elapsed  ETA %s  %s%s", tty_ ? "\r\033[2K" : "",
               bar.c_str(), percent, FormatDuration(elapsed).c_str(), eta.c_str(),
               label.substr(0, 60).c_str(), tty_ && !final ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace qevict
