#include "eval/attention_miss.h"

namespace qevict {
namespace {

// [layer][window]: whether each window of the policy's cache is in `tier` (kEvicted: not
// attended, dropped or in the cold tier).
std::vector<std::vector<uint8_t>> WindowsIn(const TieredCache& cache, Tier tier) {
  const int n_layers = cache.geometry().n_layers;
  std::vector<std::vector<uint8_t>> out(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    const WindowView view = cache.View(l);
    out[l].resize(view.windows.size());
    for (size_t w = 0; w < view.windows.size(); ++w) {
      const Tier t = view.windows[w].tier;
      out[l][w] = t == tier || (tier == Tier::kEvicted && t == Tier::kCold);
    }
  }
  return out;
}

bool Flag(const std::vector<uint8_t>& flags, size_t w) { return w < flags.size() && flags[w]; }

}  // namespace

void AttentionMissTracker::BeforeStep(const TieredCache& policy) {
  evicted_ = WindowsIn(policy, Tier::kEvicted);
  quantized_ = WindowsIn(policy, Tier::kQuant);
}

void AttentionMissTracker::AfterBatch(const TieredCache& policy) {
  WindowFlags evicted = WindowsIn(policy, Tier::kEvicted);
  const int64_t step = policy.routing_steps();
  if (step != last_routing_step_) {
    last_routing_step_ = step;
    Event e;
    e.dropped = evicted;
    for (size_t l = 0; l < e.dropped.size(); ++l) {
      for (size_t w = 0; w < e.dropped[l].size(); ++w) {
        if (l < after_last_batch_.size() && Flag(after_last_batch_[l], w)) e.dropped[l][w] = 0;
      }
    }
    e.gone = evicted;
    events_.push_back(std::move(e));
  }
  after_last_batch_ = std::move(evicted);
}

void AttentionMissTracker::AfterStep(const TieredCache& shadow) {
  const int n_layers = shadow.geometry().n_layers;
  double missed = 0.0, quantized = 0.0;
  for (int l = 0; l < n_layers; ++l) {
    const WindowView view = shadow.View(l);
    double windows_mass = 0.0;
    for (size_t w = 0; w < view.windows.size(); ++w) {
      const double m = view.windows[w].last_mass;
      windows_mass += m;
      if (Flag(evicted_[l], w)) missed += m;
      if (Flag(quantized_[l], w)) quantized += m;
    }
    const double sink_mass = std::max(0.0, 1.0 - windows_mass);
    for (Event& e : events_) {
      if (e.steps >= horizon_) continue;
      double existing = sink_mass;
      for (size_t w = 0; w < e.gone[l].size() && w < view.windows.size(); ++w) {
        const double m = view.windows[w].last_mass;
        existing += m;
        if (e.gone[l][w]) e.gone_missed += m;
        if (e.dropped[l][w]) e.dropped_missed += m;
      }
      e.existing += existing;
    }
  }
  missed_.push_back(missed / n_layers);
  quantized_mass_.push_back(quantized / n_layers);
  for (Event& e : events_) {
    if (e.steps < horizon_) ++e.steps;
  }
}

namespace {
double MeanOrZero(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double sum = 0.0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}
}  // namespace

double AttentionMissTracker::mean_missed() const { return MeanOrZero(missed_); }

double AttentionMissTracker::mean_quantized() const { return MeanOrZero(quantized_mass_); }

double AttentionMissTracker::MeanFmm(double Event::*missed) const {
  double sum = 0.0;
  int n = 0;
  for (const Event& e : events_) {
    if (e.steps == 0 || e.existing <= 0.0) continue;
    sum += e.*missed / e.existing;
    ++n;
  }
  return n > 0 ? sum / n : -1.0;
}

}  // namespace qevict
