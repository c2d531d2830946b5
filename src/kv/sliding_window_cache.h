// The keys and values of a model's sliding-window layers (gemma3's local layers, Mistral): a
// query at position p attends keys at p - window + 1 .. p, so each layer keeps a ring of exactly
// `window` tokens in fp16 (keys after RoPE), all such a layer can ever attend. No policy applies
// to them: their bytes are fixed by the window, and the budget counts them
// (kv/interleaved_cache.h, docs/kv-cache.md "Sliding-window layers").
//
// A batch of n tokens is staged by Store and attended, together with the ring, by Attend, which
// then writes the batch's last min(n, window) tokens into the ring: the ring never needs more than
// `window` slots, whatever the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "util/thread_pool.h"

namespace qevict {

class SlidingWindowCache {
 public:
  // geometry: n_layers is the number of sliding layers, max_tokens the run's context.
  SlidingWindowCache(const KvGeometry& geometry, int window, const Rope& rope);
  SlidingWindowCache(const SlidingWindowCache&) = delete;
  SlidingWindowCache& operator=(const SlidingWindowCache&) = delete;
  // A copy of `other`'s rings that rotates new keys with `rope` (forks of a prefilled prompt).
  SlidingWindowCache(const SlidingWindowCache& other, const Rope& rope);

  void Reset();  // a new run
  // The rings between batches (kv/cache_state.cc): each layer's held tokens, oldest first.
  void SaveState(ByteWriter& out) const;
  void LoadState(ByteReader& in);
  // Same contract as KvCache::Store / Attend, with `layer` among the sliding layers. Attend must
  // follow the Store of the same batch.
  void Store(int layer, int n, const int32_t* pos, const float* k, const float* v);
  void Attend(int layer, int n, const int32_t* pos, const float* q, float* out, ThreadPool& pool);

  // The ring's keys (after RoPE) and values in fp32, oldest first, with their positions
  // ([tokens][n_kv_heads][head_dim]); nothing staged.
  void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                  std::vector<int32_t>* positions) const;
  int window() const { return window_; }
  int n_layers() const { return geo_.n_layers; }
  int64_t tokens_seen() const { return layers_.empty() ? 0 : layers_.back().count; }
  // Bytes of keys and values the rings hold (fp16, min(tokens, window) per layer).
  int64_t bytes() const;
  // Bytes allocated for the rings and the staged batch.
  int64_t reserved_bytes() const;

 private:
  struct Ring {
    std::vector<uint16_t> k, v;     // [n_kv_heads][slots][head_dim] fp16
    std::vector<int32_t> pos;       // [slots] position of each slot
    int64_t count = 0;              // tokens stored in this run
  };
  // Keys [begin, end) of one head in attention order: the ring oldest first, then the staged
  // batch; calls fn(offset, k_rows, v_rows, rows) for each contiguous piece.
  template <class Fn>
  void ForPieces(const Ring& r, int head, int64_t begin, int64_t end, Fn&& fn) const;
  int64_t Held(const Ring& r) const { return std::min<int64_t>(r.count, window_); }
  int64_t Oldest(const Ring& r) const { return r.count > window_ ? r.count % window_ : 0; }
  void Commit(Ring& r);

  KvGeometry geo_;
  int window_;
  int64_t slots_;  // min(window, max_tokens): token t lives in slot t % window
  const Rope& rope_;
  std::vector<Ring> layers_;
  // The batch between Store and Attend: [n_kv_heads][n][head_dim] fp16 and its positions.
  std::vector<uint16_t> stage_k_, stage_v_;
  std::vector<int32_t> stage_pos_;
  int stage_n_ = 0;
  int stage_layer_ = -1;
};

}  // namespace qevict
