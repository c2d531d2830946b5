#include "eval/attention_miss.h"

namespace qevict {
namespace {

std::vector<std::vector<uint8_t>> EvictedWindows(const TieredCache& cache) {
  const int n_layers = cache.geometry().n_layers;
  std::vector<std::vector<uint8_t>> out(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    const WindowView view = cache.View(l);
    out[l].resize(view.windows.size());
    for (size_t w = 0; w < view.windows.size(); ++w) {
      out[l][w] = view.windows[w].tier == Tier::kEvicted;
    }
  }
  return out;
}

}  // namespace

void AttentionMissTracker::BeforeStep(const TieredCache& policy) {
  evicted_ = EvictedWindows(policy);
}

void AttentionMissTracker::AfterBatch(const TieredCache& policy) {
  const int64_t step = policy.Stats().routing_steps;
  if (step == last_routing_step_) return;
  last_routing_step_ = step;
  Event e;
  e.gone = EvictedWindows(policy);
  events_.push_back(std::move(e));
}

void AttentionMissTracker::AfterStep(const TieredCache& shadow) {
  const int n_layers = shadow.geometry().n_layers;
  double missed = 0.0;
  std::vector<double> event_missed(events_.size(), 0.0), event_existing(events_.size(), 0.0);
  for (int l = 0; l < n_layers; ++l) {
    const WindowView view = shadow.View(l);
    double windows_mass = 0.0;
    for (size_t w = 0; w < view.windows.size(); ++w) {
      const double m = view.windows[w].last_mass;
      windows_mass += m;
      if (w < evicted_[l].size() && evicted_[l][w]) missed += m;
    }
    const double sink_mass = std::max(0.0, 1.0 - windows_mass);
    for (size_t e = 0; e < events_.size(); ++e) {
      if (events_[e].steps >= horizon_) continue;
      const std::vector<uint8_t>& gone = events_[e].gone[l];
      double existing = sink_mass;
      for (size_t w = 0; w < gone.size() && w < view.windows.size(); ++w) {
        const double m = view.windows[w].last_mass;
        existing += m;
        if (gone[w]) event_missed[e] += m;
      }
      event_existing[e] += existing;
    }
  }
  missed_.push_back(missed / n_layers);
  for (size_t e = 0; e < events_.size(); ++e) {
    if (events_[e].steps >= horizon_) continue;
    events_[e].missed += event_missed[e];
    events_[e].existing += event_existing[e];
    ++events_[e].steps;
  }
}

double AttentionMissTracker::mean_missed() const {
  if (missed_.empty()) return 0.0;
  double sum = 0.0;
  for (double m : missed_) sum += m;
  return sum / static_cast<double>(missed_.size());
}

double AttentionMissTracker::mean_fmm() const {
  double sum = 0.0;
  int n = 0;
  for (const Event& e : events_) {
    if (e.steps == 0 || e.existing <= 0.0) continue;
    sum += e.missed / e.existing;
    ++n;
  }
  return n > 0 ? sum / n : -1.0;
}

}  // namespace qevict
