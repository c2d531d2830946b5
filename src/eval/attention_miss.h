// Missed attention mass and future missed mass (docs/qevict-spec.md, "Diagnostics"), measured
// against a shadow: a never-routing fp16 fork of the same prompt fed the same tokens as the
// policy's session, whose per-window attention is what the full cache attends.
//   missed mass at a decode step: the shadow's attention (mean over layers, each layer's query
//     heads averaged) on windows the policy held no longer when it attended at that step;
//   FMM of a routing step t: over the next H decode steps, the shadow's mass on windows that
//     existed at t and were not resident after t, divided by its mass on everything that
//     existed at t (sinks and those windows); reported as the mean over routing steps.
// Quantized windows are attended, so they are never missed.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/tiered_cache.h"

namespace qevict {

class AttentionMissTracker {
 public:
  explicit AttentionMissTracker(int horizon) : horizon_(horizon) {}

  // Before the policy's session processes a decode step: the tiers it attends with.
  void BeforeStep(const TieredCache& policy);
  // After both sessions processed the step: the shadow's attention from that step's query.
  void AfterStep(const TieredCache& shadow);
  // After a batch that may have routed (a decode step or a prompt): records a routing event
  // when the policy's routing step counter moved.
  void AfterBatch(const TieredCache& policy);

  const std::vector<double>& missed_per_step() const { return missed_; }
  double mean_missed() const;
  double mean_fmm() const;  // -1 when no routing step had a following decode step

 private:
  struct Event {
    std::vector<std::vector<uint8_t>> gone;  // [layer][window existing at t]: not resident after t
    int steps = 0;
    double missed = 0.0, existing = 0.0;
  };
  int horizon_;
  int64_t last_routing_step_ = -1;
  std::vector<std::vector<uint8_t>> evicted_;  // [layer][window]: evicted when the step attended
  std::vector<double> missed_;
  std::vector<Event> events_;
};

}  // namespace qevict
