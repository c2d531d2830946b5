// Causal grouped-query attention over a cache whose tokens are addressed by a storage index
// (0..n_stored) with non-decreasing positions. The cache supplies two callbacks that work on a
// contiguous index range of one KV head:
//   score(head, begin, end, q_group, n_q, scores, ld, scale)  -> scores[qi*ld + j]
//   accumulate(head, begin, end, probs, n_q, ld, acc)          -> acc[qi][d] += probs * V
// Work is split over (query, KV head) pairs and, when there are too few of those for the threads
// (decoding), over key ranges whose softmax partials are merged afterwards. No n x n matrix is
// ever formed: scratch is one row of scores per query group.
//
// An optional observer sees the softmax probabilities without changing any arithmetic (the
// outputs are bit-identical with and without one); the tiered cache uses it to accumulate the
// attention mass of each window inside the same pass:
//   Prepare(n, splits, visible)                    before the parallel loop
//   OnItem(item, i, h, begin, end, probs, ld, sums) probs[g*ld + j] = exp(score - item max) of
//                                                   query i, head h*group+g, key begin+j;
//                                                   sums[g] = their sum (called in parallel)
//   OnShare(i, h, split, g, share)                 only when splits > 1: the fraction of the
//                                                   total probability of (i, h*group+g) that
//                                                   lies in that split (serial, after merging)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kv/kv_cache.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace qevict {

// Observer that observes nothing (compiles away).
struct NoAttentionObserver {
  static constexpr bool kEnabled = false;
  void Prepare(int, int64_t, const int64_t*) {}
  void OnItem(int64_t, int, int, int64_t, int64_t, const float*, int64_t, const float*) {}
  void OnShare(int, int, int64_t, int, float) {}
};

// Prompt chunks: queries are processed in blocks of tokens per KV head, so each key
// and value row is fetched from memory once per block rather than once per token (at long
// context the per-token re-reads of the cache, not the arithmetic, bound prefill). Keys beyond a
// query's causal horizon get probability exactly 0. Observers see the same per-(query, head)
// items as in the unblocked path, with splits == 1.
inline constexpr int kQueryBlock = 8;
// Tokens per parallel item of the blocked path: kQueryBlock, or twice that for an odd group, so
// the item's rows (tokens x group query heads) fill whole 16-float vectors: with SmolLM2's group
// of 3, 8 tokens make 24 rows and leave 8 of the score kernel's 32 AVX-512 lanes idle; 16 make
// 48, three full vectors. The observers' rows stay per kQueryBlock tokens (QueryItemRow): an
// item owns every row of its tokens, so they stay race-free and their sums keep their order.
inline constexpr int QueryBlockTokens(int group) {
  return group % 2 == 0 ? kQueryBlock : 2 * kQueryBlock;
}

// Whether a batch of n queries goes through the blocked path (GroupedAttentionOverPrefix). The
// window-mass observer derives its race-free rows from the same rule (kv/window_mass.cc).
inline constexpr bool UsesQueryBlocks(int n) { return n >= 2 * kQueryBlock; }
// The parallel item's query row of query i in a batch of n (per KV head): a block of
// kQueryBlock queries in the blocked path, one query otherwise.
inline constexpr int64_t QueryItemRow(int n, int i) { return UsesQueryBlocks(n) ? i / kQueryBlock : i; }

template <class ScoreFn, class AccumulateFn, class Observer>
void GroupedAttentionBlocked(const KvGeometry& geo, int n, const int64_t* visible,
                             const float* q, float* out, ThreadPool& pool, ScoreFn&& score,
                             AccumulateFn&& accumulate, Observer& observer,
                             const int64_t* first_key = nullptr) {
  const int n_kv = geo.n_kv_heads;
  const int group = geo.n_heads / n_kv;
  const int hd = geo.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int block = QueryBlockTokens(group);
  const int64_t n_blocks = (n + block - 1) / block;
  if constexpr (Observer::kEnabled) observer.Prepare(n, 1, visible);

  pool.ParallelFor(n_blocks * n_kv, 1, [&](int64_t first, int64_t last) {
    thread_local std::vector<float> scores;  // [rows][m]
    thread_local std::vector<float> queries;  // [rows][hd], rows = tokens in block x group
    thread_local std::vector<float> acc;      // [rows][hd]
    thread_local std::vector<float> sums;     // [rows]
    for (int64_t item = first; item < last; ++item) {
      const int h = static_cast<int>(item % n_kv);
      const int t0 = static_cast<int>(item / n_kv) * block;
      const int t1 = std::min(n, t0 + block);
      const int rows = (t1 - t0) * group;
      int64_t m = 0;
      int64_t f0 = first_key != nullptr ? first_key[t0] : 0;  // first keys are non-decreasing in t
      for (int t = t0; t < t1; ++t) m = std::max(m, visible[t]);
      m = std::max<int64_t>(m - f0, 0);  // keys [f0, f0 + m) cover the block
      queries.resize(static_cast<size_t>(rows) * hd);
      acc.assign(static_cast<size_t>(rows) * hd, 0.0f);
      sums.assign(rows, 0.0f);
      for (int t = t0; t < t1; ++t) {
        const float* src = q + (static_cast<int64_t>(t) * geo.n_heads + h * group) * hd;
        std::copy(src, src + static_cast<int64_t>(group) * hd,
                  queries.data() + static_cast<int64_t>(t - t0) * group * hd);
      }
      if (m > 0) {
        if (static_cast<int64_t>(scores.size()) < rows * m) scores.resize(rows * m);
        score(h, f0, f0 + m, queries.data(), rows, scores.data(), m, scale);
        for (int r = 0; r < rows; ++r) {
          const int t = t0 + r / group;
          const int64_t lo = first_key != nullptr ? first_key[t] - f0 : 0;  // keys before: probability 0
          const int64_t vis = visible[t] - f0;
          float* row = scores.data() + static_cast<int64_t>(r) * m;
          if (vis > lo) sums[r] = ExpShiftSum(row + lo, vis - lo, MaxOf(row + lo, vis - lo));
          std::fill(row, row + lo, 0.0f);
          std::fill(row + std::max(vis, lo), row + m, 0.0f);
        }
        accumulate(h, f0, f0 + m, scores.data(), rows, m, acc.data());
      }
      for (int r = 0; r < rows; ++r) {
        const int t = t0 + r / group;
        float* o = out + (static_cast<int64_t>(t) * geo.n_heads + h * group + r % group) * hd;
        const float inv = sums[r] > 0.0f ? 1.0f / sums[r] : 0.0f;
        for (int d = 0; d < hd; ++d) o[d] = acc[static_cast<int64_t>(r) * hd + d] * inv;
      }
      if constexpr (Observer::kEnabled) {
        for (int t = t0; t < t1; ++t) {
          const int64_t r0 = static_cast<int64_t>(t - t0) * group;
          observer.OnItem(static_cast<int64_t>(t) * n_kv + h, t, h, 0, visible[t],
                          scores.data() + r0 * m, m, sums.data() + r0);
        }
      }
    }
  });
}

// visible[i]: how many stored keys (a prefix in storage order) query i may attend. With
// `first_key` (sliding windows), query i attends keys [first_key[i], visible[i]) instead; it must be
// non-decreasing in i and is not supported with an enabled observer.
template <class ScoreFn, class AccumulateFn, class Observer>
void GroupedAttentionOverPrefix(const KvGeometry& geo, int n, const int64_t* visible,
                                const float* q, float* out, ThreadPool& pool, ScoreFn&& score,
                                AccumulateFn&& accumulate, Observer& observer,
                                const int64_t* first_key = nullptr) {
  if constexpr (Observer::kEnabled) QEVICT_CHECK(first_key == nullptr);
  if (UsesQueryBlocks(n)) {
    GroupedAttentionBlocked(geo, n, visible, q, out, pool, score, accumulate, observer, first_key);
    return;
  }
  const int n_kv = geo.n_kv_heads;
  const int group = geo.n_heads / n_kv;
  const int hd = geo.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  int64_t max_visible = 0;
  for (int i = 0; i < n; ++i) max_visible = std::max(max_visible, visible[i]);

  const int64_t pairs = static_cast<int64_t>(n) * n_kv;
  const int64_t want_items = 4 * static_cast<int64_t>(pool.size());
  int64_t splits = 1;
  if (pairs < want_items) {
    const int64_t max_splits = std::max<int64_t>(1, max_visible / 256);
    splits = std::min((want_items + pairs - 1) / pairs, max_splits);
    // Equal items in a multiple of the threads, so no thread is left with one item more than
    // the others (3 KV heads x 3 splits on 2 threads would give 5 and 4).
    while (splits < max_splits && (pairs * splits) % pool.size() != 0) ++splits;
  }
  const int64_t items = pairs * splits;
  const int64_t partial_floats = static_cast<int64_t>(group) * (hd + 2);
  // Every float of every item's partial is written below, so the buffer is reused as is.
  // (A thread_local of the calling thread; workers reach it through the pointer.)
  thread_local std::vector<float> partial_buffer;
  if (partial_buffer.size() < static_cast<size_t>(items * partial_floats)) {
    partial_buffer.resize(static_cast<size_t>(items * partial_floats));
  }
  float* const partials = partial_buffer.data();
  if constexpr (Observer::kEnabled) observer.Prepare(n, splits, visible);

  pool.ParallelFor(items, 1, [&](int64_t first, int64_t last) {
    thread_local std::vector<float> scores;
    for (int64_t item = first; item < last; ++item) {
      const int64_t s = item % splits;
      const int64_t pair = item / splits;
      const int h = static_cast<int>(pair % n_kv);
      const int i = static_cast<int>(pair / n_kv);
      const int64_t lo = first_key != nullptr ? first_key[i] : 0;
      const int64_t begin = lo + (visible[i] - lo) * s / splits;
      const int64_t end = lo + (visible[i] - lo) * (s + 1) / splits;
      float* part = partials + item * partial_floats;
      float* maxes = part;
      float* sums = part + group;
      float* acc = part + 2 * group;
      std::fill(acc, acc + static_cast<int64_t>(group) * hd, 0.0f);
      const int64_t m = end - begin;
      if (m <= 0) {
        std::fill(maxes, maxes + group, -INFINITY);
        std::fill(sums, sums + group, 0.0f);
        continue;
      }
      if (static_cast<int64_t>(scores.size()) < group * m) scores.resize(group * m);
      const float* qg = q + (static_cast<int64_t>(i) * geo.n_heads + h * group) * hd;
      score(h, begin, end, qg, group, scores.data(), m, scale);
      for (int g = 0; g < group; ++g) {
        maxes[g] = MaxOf(scores.data() + g * m, m);
        sums[g] = ExpShiftSum(scores.data() + g * m, m, maxes[g]);
      }
      accumulate(h, begin, end, scores.data(), group, m, acc);
      if constexpr (Observer::kEnabled) {
        observer.OnItem(item, i, h, begin, end, scores.data(), m, sums);
      }
    }
  });

  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int h = static_cast<int>(pair % n_kv);
    const int i = static_cast<int>(pair / n_kv);
    for (int g = 0; g < group; ++g) {
      float* o = out + (static_cast<int64_t>(i) * geo.n_heads + h * group + g) * hd;
      float global_max = -INFINITY;
      for (int64_t s = 0; s < splits; ++s) {
        global_max = std::max(global_max, partials[(pair * splits + s) * partial_floats + g]);
      }
      std::fill(o, o + hd, 0.0f);
      float total = 0.0f;
      for (int64_t s = 0; s < splits; ++s) {
        const float* part = partials + (pair * splits + s) * partial_floats;
        if (part[group + g] == 0.0f) continue;
        const float w = std::exp(part[g] - global_max);
        total += part[group + g] * w;
        const float* acc = part + 2 * group + static_cast<int64_t>(g) * hd;
        for (int d = 0; d < hd; ++d) o[d] += w * acc[d];
      }
      const float inv = total > 0.0f ? 1.0f / total : 0.0f;
      for (int d = 0; d < hd; ++d) o[d] *= inv;
      if constexpr (Observer::kEnabled) {
        if (splits > 1) {
          for (int64_t s = 0; s < splits; ++s) {
            const float* part = partials + (pair * splits + s) * partial_floats;
            if (part[group + g] == 0.0f) continue;
            observer.OnShare(i, h, s, g, part[group + g] * std::exp(part[g] - global_max) * inv);
          }
        }
      }
    }
  }
}

// Storage positions stored_pos[0..n_stored) are non-decreasing; query i attends the prefix of
// keys whose position is <= pos[i].
template <class ScoreFn, class AccumulateFn>
void GroupedAttention(const KvGeometry& geo, int n, const int32_t* pos, const float* q,
                      float* out, ThreadPool& pool, const int32_t* stored_pos, int64_t n_stored,
                      ScoreFn&& score, AccumulateFn&& accumulate) {
  thread_local std::vector<int64_t> visible;
  visible.resize(n);
  for (int i = 0; i < n; ++i) {
    visible[i] = std::upper_bound(stored_pos, stored_pos + n_stored, pos[i]) - stored_pos;
  }
  NoAttentionObserver none;
  GroupedAttentionOverPrefix(geo, n, visible.data(), q, out, pool, score, accumulate, none);
}

}  // namespace qevict
