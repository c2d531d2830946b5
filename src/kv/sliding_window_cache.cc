#include "kv/sliding_window_cache.h"

#include <algorithm>

#include "kernels/attention.h"
#include "kv/grouped_attention.h"
#include "util/error.h"

namespace qevict {

SlidingWindowCache::SlidingWindowCache(const KvGeometry& geometry, int window, const Rope& rope)
    : geo_(geometry),
      window_(window),
      // A run shorter than the window never fills it: slot t % window < max_tokens then.
      slots_(std::min<int64_t>(window, std::max<int64_t>(geometry.max_tokens, 1))),
      rope_(rope),
      layers_(geometry.n_layers) {
  QEVICT_CHECK(geo_.n_layers > 0 && window_ > 0 && geo_.n_kv_heads > 0 &&
               geo_.n_heads % geo_.n_kv_heads == 0);
  const size_t elems = static_cast<size_t>(geo_.n_kv_heads) * slots_ * geo_.head_dim;
  for (Ring& r : layers_) {
    r.k.resize(elems);
    r.v.resize(elems);
    r.pos.resize(slots_);
  }
}

SlidingWindowCache::SlidingWindowCache(const SlidingWindowCache& other, const Rope& rope)
    : geo_(other.geo_),
      window_(other.window_),
      slots_(other.slots_),
      rope_(rope),
      layers_(other.layers_) {
  QEVICT_CHECK(other.stage_layer_ == -1);  // not between a Store and its Attend
}

void SlidingWindowCache::Reset() {
  for (Ring& r : layers_) r.count = 0;
  stage_n_ = 0;
  stage_layer_ = -1;
}

int64_t SlidingWindowCache::bytes() const {
  int64_t held = 0;
  for (const Ring& r : layers_) held += Held(r);
  return held * geo_.n_kv_heads * geo_.head_dim * 2 * 2;
}

int64_t SlidingWindowCache::reserved_bytes() const {
  int64_t total = 0;
  for (const Ring& r : layers_) {
    total += static_cast<int64_t>((r.k.capacity() + r.v.capacity()) * sizeof(uint16_t) +
                                  r.pos.capacity() * sizeof(int32_t));
  }
  return total + static_cast<int64_t>((stage_k_.capacity() + stage_v_.capacity()) *
                                          sizeof(uint16_t) +
                                      stage_pos_.capacity() * sizeof(int32_t));
}

void SlidingWindowCache::Store(int layer, int n, const int32_t* pos, const float* k,
                               const float* v) {
  QEVICT_CHECK(layer >= 0 && layer < geo_.n_layers && n > 0);
  const Ring& r = layers_[layer];
  if (r.count + n > geo_.max_tokens) {
    throw Error("KV cache is full: " + std::to_string(r.count + n) +
                " tokens exceed the context of " + std::to_string(geo_.max_tokens));
  }
  const int hd = geo_.head_dim;
  const int n_kv = geo_.n_kv_heads;
  stage_k_.resize(static_cast<size_t>(n_kv) * n * hd);
  stage_v_.resize(stage_k_.size());
  stage_pos_.assign(pos, pos + n);
  std::vector<float> rotated(static_cast<size_t>(n_kv) * hd);
  for (int i = 0; i < n; ++i) {
    const float* ki = k + static_cast<int64_t>(i) * n_kv * hd;
    const float* vi = v + static_cast<int64_t>(i) * n_kv * hd;
    std::copy(ki, ki + rotated.size(), rotated.begin());
    rope_.Apply(rotated.data(), n_kv, hd, pos[i]);
    for (int h = 0; h < n_kv; ++h) {
      const size_t row = (static_cast<size_t>(h) * n + i) * hd;
      Fp32ToFp16Row(rotated.data() + h * hd, &stage_k_[row], hd);
      Fp32ToFp16Row(vi + h * hd, &stage_v_[row], hd);
    }
  }
  stage_n_ = n;
  stage_layer_ = layer;
}

template <class Fn>
void SlidingWindowCache::ForPieces(const Ring& r, int head, int64_t begin, int64_t end,
                                   Fn&& fn) const {
  const int hd = geo_.head_dim;
  const int64_t held = Held(r);
  const int64_t oldest = Oldest(r);
  const size_t ring_base = static_cast<size_t>(head) * slots_ * hd;
  // The ring, oldest first: slots [oldest, held) then [0, oldest).
  const int64_t runs[2][2] = {{oldest, held}, {0, oldest}};
  int64_t logical = 0;
  for (const auto& run : runs) {
    const int64_t len = run[1] - run[0];
    const int64_t lo = std::max(begin, logical), hi = std::min(end, logical + len);
    if (lo < hi) {
      const size_t row = ring_base + static_cast<size_t>(run[0] + lo - logical) * hd;
      fn(lo - begin, &r.k[row], &r.v[row], hi - lo);
    }
    logical += len;
  }
  // The staged batch.
  const int64_t lo = std::max(begin, held), hi = std::min(end, held + stage_n_);
  if (lo < hi) {
    const size_t row = (static_cast<size_t>(head) * stage_n_ + (lo - held)) * hd;
    fn(lo - begin, &stage_k_[row], &stage_v_[row], hi - lo);
  }
}

void SlidingWindowCache::Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
                                ThreadPool& pool) {
  QEVICT_CHECK(layer == stage_layer_ && n == stage_n_);
  Ring& r = layers_[layer];
  const int64_t held = Held(r);
  const int64_t oldest = Oldest(r);
  // Positions in attention order, then each query's window [first, visible).
  thread_local std::vector<int32_t> order;
  thread_local std::vector<int64_t> first, visible;
  order.resize(held + n);
  for (int64_t j = 0; j < held; ++j) order[j] = r.pos[(oldest + j) % window_];
  std::copy(pos, pos + n, order.begin() + held);
  first.resize(n);
  visible.resize(n);
  for (int i = 0; i < n; ++i) {
    visible[i] = std::upper_bound(order.begin(), order.end(), pos[i]) - order.begin();
    first[i] = std::upper_bound(order.begin(), order.end(), pos[i] - window_) - order.begin();
  }
  const int hd = geo_.head_dim;
  NoAttentionObserver none;
  GroupedAttentionOverPrefix(
      geo_, n, visible.data(), q, out, pool,
      [&](int head, int64_t begin, int64_t end, const float* qg, int n_q, float* scores,
          int64_t ld, float scale) {
        ForPieces(r, head, begin, end,
                  [&](int64_t at, const uint16_t* k, const uint16_t*, int64_t rows) {
                    ScoreFp16Keys(qg, n_q, k, hd, rows, hd, scale, scores + at, ld);
                  });
      },
      [&](int head, int64_t begin, int64_t end, const float* p, int n_q, int64_t ld,
          float* acc) {
        ForPieces(r, head, begin, end,
                  [&](int64_t at, const uint16_t*, const uint16_t* v, int64_t rows) {
                    AccumulateFp16Values(p + at, n_q, ld, v, hd, rows, hd, acc);
                  });
      },
      none, first.data());
  Commit(r);
}

// Writes the staged batch's last min(n, window) tokens into the ring.
void SlidingWindowCache::Commit(Ring& r) {
  const int hd = geo_.head_dim;
  const int n = stage_n_;
  const int from = std::max(0, n - window_);
  r.count += from;  // tokens older than the window never reach the ring
  for (int i = from; i < n; ++i) {
    const int64_t slot = r.count % window_;
    for (int h = 0; h < geo_.n_kv_heads; ++h) {
      const size_t src = (static_cast<size_t>(h) * n + i) * hd;
      const size_t dst = (static_cast<size_t>(h) * slots_ + slot) * hd;
      std::copy(&stage_k_[src], &stage_k_[src] + hd, &r.k[dst]);
      std::copy(&stage_v_[src], &stage_v_[src] + hd, &r.v[dst]);
    }
    r.pos[slot] = stage_pos_[i];
    ++r.count;
  }
  stage_layer_ = -1;
}

}  // namespace qevict

namespace qevict {

void SlidingWindowCache::DenseLayer(int layer, std::vector<float>* keys,
                                    std::vector<float>* values,
                                    std::vector<int32_t>* positions) const {
  const Ring& r = layers_[layer];
  const int hd = geo_.head_dim, n_kv = geo_.n_kv_heads;
  const int64_t n = Held(r);
  const int64_t row = int64_t{n_kv} * hd;
  keys->assign(n * row, 0.0f);
  values->assign(n * row, 0.0f);
  positions->assign(n, 0);
  const int64_t oldest = Oldest(r);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t slot = (oldest + t) % slots_;
    (*positions)[t] = r.pos[slot];
    for (int h = 0; h < n_kv; ++h) {
      const size_t at = (static_cast<size_t>(h) * slots_ + slot) * hd;
      Fp16ToFp32Row(r.k.data() + at, keys->data() + t * row + h * hd, hd);
      Fp16ToFp32Row(r.v.data() + at, values->data() + t * row + h * hd, hd);
    }
  }
}

}  // namespace qevict
