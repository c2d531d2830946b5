#include "kv/full_cache.h"

#include "kv/grouped_attention.h"
#include "kernels/attention.h"
#include "util/error.h"
#include "util/memory_stats.h"

namespace qevict {

FullCache::FullCache(const KvGeometry& geometry, const Rope& rope)
    : geo_(geometry), rope_(rope), count_(geometry.n_layers, 0) {
  QEVICT_CHECK(geo_.n_layers > 0 && geo_.n_kv_heads > 0 && geo_.head_dim > 0 &&
               geo_.max_tokens > 0 && geo_.n_heads % geo_.n_kv_heads == 0);
  const size_t elems = static_cast<size_t>(geo_.n_layers) * geo_.n_kv_heads * geo_.max_tokens *
                       geo_.head_dim;
  const int64_t bytes = static_cast<int64_t>(elems) * 2 * static_cast<int64_t>(sizeof(uint16_t));
  const int64_t available = AvailableMemoryBytes();
  if (available >= 0 && bytes > available) {
    throw Error("an fp16 KV cache for " + std::to_string(geo_.max_tokens) + " tokens needs " +
                std::to_string(bytes >> 20) + " MiB, more than the " +
                std::to_string(available >> 20) +
                " MiB this machine has available; use a shorter context or a compressing "
                "--kv-policy with --kv-budget");
  }
  // new[] without value-initialization: the kernel maps pages only when tokens are written.
  k_.reset(new uint16_t[elems]);
  v_.reset(new uint16_t[elems]);
  pos_.resize(geo_.max_tokens);
}

void FullCache::BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  std::fill(count_.begin(), count_.end(), 0);
  peak_tokens_ = 0;
  run_tokens_ = std::max<int64_t>(0, prompt_tokens) + std::max<int64_t>(0, max_new_tokens);
}

void FullCache::ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  run_tokens_ = count_.back() + std::max<int64_t>(0, prompt_tokens) +
                std::max<int64_t>(0, max_new_tokens);
}

uint16_t* FullCache::k_row(int layer, int head, int64_t index) const {
  return k_.get() +
         ((static_cast<int64_t>(layer) * geo_.n_kv_heads + head) * geo_.max_tokens + index) *
             geo_.head_dim;
}

uint16_t* FullCache::v_row(int layer, int head, int64_t index) const {
  return v_.get() +
         ((static_cast<int64_t>(layer) * geo_.n_kv_heads + head) * geo_.max_tokens + index) *
             geo_.head_dim;
}

void FullCache::Store(int layer, int n, const int32_t* pos, const float* k, const float* v) {
  const int64_t start = count_[layer];
  if (start + n > geo_.max_tokens) {
    throw Error("KV cache is full: " + std::to_string(start + n) + " tokens exceed the context of " +
                std::to_string(geo_.max_tokens));
  }
  const int hd = geo_.head_dim;
  std::vector<float> rotated(static_cast<size_t>(geo_.n_kv_heads) * hd);
  for (int i = 0; i < n; ++i) {
    const float* ki = k + static_cast<int64_t>(i) * geo_.n_kv_heads * hd;
    const float* vi = v + static_cast<int64_t>(i) * geo_.n_kv_heads * hd;
    std::copy(ki, ki + rotated.size(), rotated.begin());
    rope_.Apply(rotated.data(), geo_.n_kv_heads, hd, pos[i]);
    for (int h = 0; h < geo_.n_kv_heads; ++h) {
      Fp32ToFp16Row(rotated.data() + h * hd, k_row(layer, h, start + i), hd);
      Fp32ToFp16Row(vi + h * hd, v_row(layer, h, start + i), hd);
    }
    if (layer == 0) pos_[start + i] = pos[i];
  }
  count_[layer] = start + n;
  peak_tokens_ = std::max(peak_tokens_, count_[layer]);
}

void FullCache::AppendFp16Rows(int layer, int n, const int32_t* pos, const uint16_t* k,
                               const uint16_t* v, int64_t rows_per_head) {
  const int64_t start = count_[layer];
  QEVICT_CHECK(n >= 0 && start + n <= geo_.max_tokens);
  const int hd = geo_.head_dim;
  for (int h = 0; h < geo_.n_kv_heads; ++h) {
    const int64_t offset = static_cast<int64_t>(h) * rows_per_head * hd;
    std::copy(k + offset, k + offset + static_cast<int64_t>(n) * hd, k_row(layer, h, start));
    std::copy(v + offset, v + offset + static_cast<int64_t>(n) * hd, v_row(layer, h, start));
  }
  if (layer == 0) std::copy(pos, pos + n, pos_.begin() + start);
  count_[layer] = start + n;
  peak_tokens_ = std::max(peak_tokens_, count_[layer]);
}

void FullCache::Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
                       ThreadPool& pool) {
  const int64_t stored = count_[layer];
  GroupedAttention(geo_, n, pos, q, out, pool, pos_.data(), stored,
                   [&](int head, int64_t begin, int64_t end, const float* qg, int n_q, float* scores,
                       int64_t ld, float scale) {
                     ScoreFp16Keys(qg, n_q, k_row(layer, head, begin), geo_.head_dim, end - begin,
                                   geo_.head_dim, scale, scores, ld);
                   },
                   [&](int head, int64_t begin, int64_t end, const float* p, int n_q, int64_t ld,
                       float* acc) {
                     AccumulateFp16Values(p, n_q, ld, v_row(layer, head, begin), geo_.head_dim,
                                          end - begin, geo_.head_dim, acc);
                   });
}

KvStats FullCache::Stats() const {
  KvStats s;
  s.tokens_seen = count_.back();
  s.tokens_resident = count_.back();
  s.fp16_bytes = count_.back() * geo_.fp16_bytes_per_token();
  s.peak_bytes = peak_tokens_ * geo_.fp16_bytes_per_token();
  s.full_fp16_bytes = s.fp16_bytes;
  // Pages of the preallocated arrays are touched as tokens arrive and kept for later runs.
  s.pool_reserved_bytes = s.peak_bytes;
  s.reserved_bytes = s.peak_bytes;
  s.peak_reserved_bytes = s.peak_bytes;
  return s;
}

}  // namespace qevict

namespace qevict {

void FullCache::DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                           std::vector<int32_t>* positions) const {
  const int hd = geo_.head_dim, n_kv = geo_.n_kv_heads;
  const int64_t n = count_[layer];
  const int64_t row = int64_t{n_kv} * hd;
  keys->assign(n * row, 0.0f);
  values->assign(n * row, 0.0f);
  positions->assign(pos_.begin(), pos_.begin() + n);
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < n_kv; ++h) {
      Fp16ToFp32Row(k_row(layer, h, t), keys->data() + t * row + h * hd, hd);
      Fp16ToFp32Row(v_row(layer, h, t), values->data() + t * row + h * hd, hd);
    }
  }
}

}  // namespace qevict
