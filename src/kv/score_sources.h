// Score sources of the tiered cache (docs/kv-cache.md, "Score sources"): where the importance a
// policy routes on comes from. Each source fills its part of a layer's band description
// (kv/routing.h) at a routing step, behind one interface:
//   AttentionMassSource      attention mass per window accumulated inside the attention pass
//                            (KvConfig::score: cumulative, decayed or normalized; H2O, TOVA,
//                            qevict): BandWindow::score and last_mass;
//   QueryAwareSource         the attention of the prompt's last queries (the observation buffer)
//                            on every resident token, after prompt batches (snapkv, pyramidkv,
//                            qevict-qa): LayerBand::observation;
//   ReconstructionSource     window scores handed over by the engine before the first prompt
//                            end (KVzip's reconstruction pass, engine/reconstruction.h);
//   KeyNormSource,           window scores the cache computes itself at the first prompt end
//   ExpectedAttentionSource  (kv/window_priors.h): LayerBand::external.
// A source reads the cache through ResidentReader (read-only) and never changes its tiers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "kv/observation_buffer.h"
#include "kv/routing.h"
#include "kv/window_mass.h"
#include "kv/window_table.h"
#include "util/thread_pool.h"

namespace qevict {

// What a score source may read of the cache: its windows, its observation buffer, and its
// resident keys and values as attention sees them.
class ResidentReader {
 public:
  virtual ~ResidentReader() = default;
  virtual const WindowTable& table() const = 0;
  virtual const ObservationBuffer& observation() const = 0;
  virtual const KvGeometry& geometry() const = 0;
  virtual const Rope& rope() const = 0;
  // Scaled scores of n_q queries of KV head `head` on resident keys [begin, end) of a layer.
  virtual void ScoreRange(int layer, int head, int64_t begin, int64_t end, const float* q,
                          int n_q, float* scores, int64_t ld, float scale) const = 0;
  virtual void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                          std::vector<int32_t>* positions) const = 0;
};

// The routing step a source prepares for.
struct ScoreStep {
  BatchKind trigger = BatchKind::kPromptEnd;
  bool first_prompt_end = false;  // the end of the run's first prompt (external scores' step)
  bool limited = false;           // the run has a budget
};

class BandScoreSource {
 public:
  virtual ~BandScoreSource() = default;
  virtual const char* name() const = 0;
  // Before the bands are described: computes what this step needs (layers in parallel).
  // Returns the wall seconds spent computing scores the cache reports (KvStats::prior_seconds).
  virtual double Prepare(const ScoreStep& step, const ResidentReader& cache, ThreadPool& pool) {
    return 0.0;
  }
  // Fills this source's part of a layer's description: `windows` are the layer's resident
  // windows (band, then recent) in the order of the table, `band` the layer's band.
  virtual void Describe(int layer, const ResidentReader& cache, std::span<BandWindow> windows,
                        LayerBand& band) const = 0;
  // After the policy planned the step: what the step consumed is dropped.
  virtual void Consumed(const ScoreStep& step) {}
};

// Attention mass per window, accumulated in the attention pass. Its scores live in the window
// table's records (they move with the windows); this source accumulates and reports them.
class AttentionMassSource final : public BandScoreSource {
 public:
  void Configure(const KvGeometry& geometry, int window, int64_t max_windows);
  const char* name() const override { return "attention-mass"; }
  WindowMassObserver& observer() { return mass_; }
  // After an attention call with the observer: adds its mass to the layer's windows.
  void Accumulate(WindowTable& table, LayerWindows& l, int n, const int64_t* visible);
  void Describe(int layer, const ResidentReader& cache, std::span<BandWindow> windows,
                LayerBand& band) const override;

 private:
  WindowMassObserver mass_;
};

// The pooled attention of the observed prompt queries on every resident token.
class QueryAwareSource final : public BandScoreSource {
 public:
  explicit QueryAwareSource(bool wanted) : wanted_(wanted) {}
  const char* name() const override { return "query-aware"; }
  // Whether this step has an observation: the policy observes, the run has a budget, the
  // buffer is held, and a prompt batch just ended.
  bool ActiveAt(const ScoreStep& step, const ObservationBuffer& buffer) const {
    return wanted_ && step.limited && buffer.held() && step.trigger != BatchKind::kGenerated;
  }
  double Prepare(const ScoreStep& step, const ResidentReader& cache, ThreadPool& pool) override;
  void Describe(int layer, const ResidentReader& cache, std::span<BandWindow> windows,
                LayerBand& band) const override;
  // A cache kept for forks observes whatever its own policy wants.
  void set_wanted(bool wanted) { wanted_ = wanted; }

 private:
  void ComputeLayer(int layer, const ResidentReader& cache);
  bool wanted_;
  bool active_ = false;
  std::vector<std::vector<float>> tokens_;    // [layer][kv head][resident token]
  std::vector<std::vector<int64_t>> offsets_;  // [layer][resident window] first token
};

// Window scores by window index for the routing step that ends the run's first prompt
// (LayerBand::external), held per layer until that step consumes them. The base holds scores
// handed over from outside (reconstruction); the priors compute their own.
class WindowScoreSource : public BandScoreSource {
 public:
  explicit WindowScoreSource(int n_layers) : scores_(n_layers) {}
  void Accept(int layer, std::vector<float> scores) { scores_[layer] = std::move(scores); }
  const std::vector<std::vector<float>>& scores() const { return scores_; }
  void CopyFrom(const WindowScoreSource& other) { scores_ = other.scores_; }
  void Clear() {
    for (auto& s : scores_) s = {};
  }
  double Prepare(const ScoreStep& step, const ResidentReader& cache, ThreadPool& pool) override;
  void Describe(int layer, const ResidentReader& cache, std::span<BandWindow> windows,
                LayerBand& band) const override;
  void Consumed(const ScoreStep& step) override;

 protected:
  // Computes a layer's scores at the first prompt end (nothing for handed-over scores).
  virtual bool computes() const { return false; }
  virtual void ComputeLayer(int layer, const ResidentReader& cache, std::vector<float>* out) const {}
  std::vector<std::vector<float>> scores_;
};

class ReconstructionSource final : public WindowScoreSource {
 public:
  using WindowScoreSource::WindowScoreSource;
  const char* name() const override { return "reconstruction"; }
};

class KeyNormSource final : public WindowScoreSource {
 public:
  KeyNormSource(int n_layers, bool wanted) : WindowScoreSource(n_layers), wanted_(wanted) {}
  const char* name() const override { return "key-norm"; }

 private:
  bool computes() const override { return wanted_; }
  void ComputeLayer(int layer, const ResidentReader& cache, std::vector<float>* out) const override;
  bool wanted_;
};

class ExpectedAttentionSource final : public WindowScoreSource {
 public:
  ExpectedAttentionSource(int n_layers, bool wanted, int future)
      : WindowScoreSource(n_layers), wanted_(wanted), future_(future) {}
  const char* name() const override { return "expected-attention"; }

 private:
  bool computes() const override { return wanted_; }
  void ComputeLayer(int layer, const ResidentReader& cache, std::vector<float>* out) const override;
  bool wanted_;
  int future_;
};

// The window-score source of a configuration (KvConfig::score_source); `wanted`: the policy
// routes on external scores (the priors are computed only then).
std::unique_ptr<WindowScoreSource> MakeWindowScoreSource(const KvConfig& config, int n_layers,
                                                         bool wanted);

}  // namespace qevict
