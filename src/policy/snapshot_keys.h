// The ranking key of qevict's variants that replace a window's history with a snapshot taken at
// a prompt end (qevict-qa: the question's pooled attention; qevict-zip: an external score such as
// reconstruction): per layer and window index,
//     key = snapshot (at the last prompt end) + (score now - score at that prompt end),
// i.e. the snapshot plus the attention mass the window received since. The score is snapshotted
// for every window the snapshot covers, band and recent alike, so no window carries its earlier
// mass into the key; windows created later have no snapshot and their key is all their mass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/routing.h"
#include "policy/policy_state.h"
#include "policy/qevict_fill.h"

namespace qevict {

class SnapshotKeys {
 public:
  void Clear() {
    snapshot_.clear();
    base_.clear();
  }
  // Sizes the per-layer tables (once per run).
  void Reserve(size_t n_layers) {
    if (snapshot_.size() != n_layers) {
      snapshot_.assign(n_layers, {});
      base_.assign(n_layers, {});
    }
  }
  // A prompt ended: `values` (by window index, first `limit` windows) become the snapshot of
  // layer l, and every covered window's mass counts from zero.
  void Take(const LayerBand& band, size_t l, const float* values, int64_t limit) {
    snapshot_[l].assign(values, values + limit);
    std::vector<float>& base = base_[l];
    base.assign(static_cast<size_t>(limit), 0.0f);
    for (const BandWindow& w : band.windows) {
      if (w.index < limit) base[w.index] = w.score;
    }
    for (const BandWindow& w : band.recent) {
      if (w.index < limit) base[w.index] = w.score;
    }
  }
  // Makes room for windows newer than the last snapshot (snapshot 0, base 0).
  void Grow(const LayerBand& band, size_t l) {
    for (const BandWindow& w : band.windows) {
      const size_t i = static_cast<size_t>(w.index);
      if (i >= base_[l].size()) {
        base_[l].resize(i + 1, 0.0f);
        snapshot_[l].resize(i + 1, 0.0f);
      }
    }
  }
  float Key(size_t l, const BandWindow& w) const {
    return snapshot_[l][w.index] + (w.score - base_[l][w.index]);
  }
  // Saved with the cache (Policy::SaveState): the snapshot, then the base scores.
  void Save(ByteWriter& out) const {
    SaveLayerTables(snapshot_, out);
    SaveLayerTables(base_, out);
  }
  void Load(ByteReader& in, int n_layers, const char* snapshot_what, const char* base_what) {
    snapshot_ = LoadLayerTables(in, n_layers, snapshot_what);
    base_ = LoadLayerTables(in, n_layers, base_what);
    bool ok = snapshot_.size() == base_.size();
    for (size_t l = 0; ok && l < base_.size(); ++l) ok = snapshot_[l].size() == base_[l].size();
    if (!ok) in.Fail("snapshot and score tables of different sizes");
  }
  std::vector<float>& snapshot(size_t l) { return snapshot_[l]; }

 private:
  std::vector<std::vector<float>> snapshot_;  // [layer][window index]
  std::vector<std::vector<float>> base_;      // [layer][window index]: score at the snapshot
};

// qevict's tiers (qevict_fill.h) ranked by SnapshotKeys; a subclass says when and what to
// snapshot (qevict-qa: the question's pooled attention at every prompt end; qevict-zip: the
// external score at the first prompt end).
class SnapshotQevictPolicy : public Policy {
 public:
  // name: the policy's, for the messages of a malformed saved state.
  SnapshotQevictPolicy(const KvConfig& config, const char* name) : fill_(config), name_(name) {}

  bool quantizes() const override { return true; }
  void BeginRun() override { keys_.Clear(); }
  void SaveState(ByteWriter& out) const override { keys_.Save(out); }
  void LoadState(ByteReader& in, int n_layers) override {
    const std::string snapshot = name_ + " snapshot", scores = name_ + " scores";
    keys_.Load(in, n_layers, snapshot.c_str(), scores.c_str());
  }
  void Route(const RoutingContext& context, Plan* plan) override {
    const size_t n_layers = context.layers.size();
    keys_.Reserve(n_layers);
    for (size_t l = 0; l < n_layers; ++l) {
      const LayerBand& band = context.layers[l];
      Snapshot(context, band, l, &keys_);
      keys_.Grow(band, l);  // windows newer than the last snapshot
      fill_.Layer(context, static_cast<int>(l),
                  [&](const BandWindow& w) { return keys_.Key(l, w); }, plan);
    }
  }

 protected:
  // Called for every layer at every routing step, before the ranking: may Take a snapshot.
  virtual void Snapshot(const RoutingContext& context, const LayerBand& band, size_t l,
                        SnapshotKeys* keys) = 0;

 private:
  QevictFill fill_;
  std::string name_;
  SnapshotKeys keys_;
};

}  // namespace qevict
