// Missed attention mass and future missed mass (docs/kv-cache.md, "Diagnostics"), measured
// against a shadow: a never-routing fp16 fork of the same prompt fed the same tokens as the
// policy's session, whose per-window attention is what the full cache attends.
//   missed mass at a decode step: the shadow's attention (mean over layers, each layer's query
//     heads averaged) on windows the policy held no longer when it attended at that step;
//   quantized mass at a decode step: the shadow's attention on windows the policy held at low
//     bits then. Those windows are attended, so they are not counted as missed: what
//     quantization changes in their attention is not measured here; this is the share of the
//     attention it could have changed;
//   FMM of a routing step t (the spec's, the paper's): over the next H decode steps, the
//     shadow's mass on windows dropped at t (resident before t, evicted by t) divided by its mass
//     on everything that existed at t (sinks and windows); the first routing step seen counts
//     every window evicted until then (in prompt-end rows, all the prompt's routing);
//   cumulative FMM of t: the same with every window not resident after t (dropped at t or
//     before) in the numerator.
// Both are reported as means over routing steps.
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
  double mean_quantized() const;
  // -1 when no routing step had a following decode step.
  double mean_fmm() const { return MeanFmm(&Event::dropped_missed); }
  double mean_fmm_cumulative() const { return MeanFmm(&Event::gone_missed); }

 private:
  using WindowFlags = std::vector<std::vector<uint8_t>>;  // [layer][window]
  struct Event {
    WindowFlags gone;     // existing at t and not resident after t
    WindowFlags dropped;  // resident before t, evicted by t
    int steps = 0;
    double gone_missed = 0.0, dropped_missed = 0.0, existing = 0.0;
  };
  double MeanFmm(double Event::*missed) const;

  int horizon_;
  int64_t last_routing_step_ = -1;
  WindowFlags evicted_;    // evicted when the step attended
  WindowFlags quantized_;  // held at low bits when the step attended
  WindowFlags after_last_batch_;  // evicted after the last batch
  std::vector<double> missed_, quantized_mass_;
  std::vector<Event> events_;
};

}  // namespace qevict
