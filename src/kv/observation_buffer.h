// The observation buffer of the tiered cache: the latest queries (after RoPE) of a prompt and
// their positions, per layer, for the score sources that read them at the prompt's end
// (query-aware pooled attention for snapkv, pyramidkv and qevict-qa; expected attention). A
// ring of `capacity` queries per layer (KvConfig::snapkv_window). It is held -- allocated and
// charged to the budget -- from a prompt's first batch until the routing step that ends the
// prompt has read it, and queries go into it only while it is remembering (prompt batches).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/byte_stream.h"

namespace qevict {

class ObservationBuffer {
 public:
  ObservationBuffer(int n_layers, int capacity, int n_heads, int head_dim);

  // Bytes the buffer of this shape holds while held: [capacity][n_heads][head_dim] fp32 and the
  // positions, per layer.
  static int64_t BytesFor(int n_layers, int capacity, int n_heads, int head_dim);
  int64_t bytes() const { return held_ ? BytesFor(n_layers(), capacity_, n_heads_, head_dim_) : 0; }

  bool held() const { return held_; }
  bool remembering() const { return remembering_; }
  void set_remembering(bool on) { remembering_ = on; }
  void Hold();     // allocates the buffers, empty
  void Release();  // frees them and stops remembering

  // Keeps the last min(n, capacity) of n queries q [n][n_heads][head_dim] at positions pos.
  void Remember(int layer, int n, const int32_t* pos, const float* q);

  int capacity() const { return capacity_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  int filled(int layer) const { return layers_[layer].filled; }
  // Query s of the ring (0 <= s < filled) and its position.
  const float* query(int layer, int s) const {
    return layers_[layer].queries.data() + static_cast<int64_t>(s) * n_heads_ * head_dim_;
  }
  int32_t position(int layer, int s) const { return layers_[layer].pos[s]; }
  // The first `filled` queries and positions of the ring (in ring order).
  std::span<const float> queries(int layer) const;
  std::span<const int32_t> positions(int layer) const;

  void CopyFrom(const ObservationBuffer& other);  // same shape

  // One layer's ring in the prompt-cache state (kv/tiered_state.cc); LoadLayer checks every
  // count and size against the shape and fails through the reader.
  void SaveLayer(int layer, ByteWriter& out) const;
  void LoadLayer(int layer, ByteReader& in);
  // Whether any ring came back allocated (LoadLayer), for the state's consistency checks.
  bool LayerHeld(int layer) const;
  void SetHeldAfterLoad(bool held) { held_ = held; }

 private:
  struct Ring {
    std::vector<float> queries;  // [capacity][n_heads][head_dim]
    std::vector<int32_t> pos;    // [capacity]
    int filled = 0, next = 0;
  };
  const int capacity_, n_heads_, head_dim_;
  std::vector<Ring> layers_;
  bool held_ = false;
  bool remembering_ = false;
};

}  // namespace qevict
