#include "kv/recall_source.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/attention.h"
#include "kv/digest_estimator.h"
#include "kv/disk_cold_store.h"
#include "util/error.h"
#include "util/scratch.h"

namespace qevict {
namespace {

constexpr int64_t kFollow = 1;  // windows after a scored one that share its score
constexpr int64_t kChunk = 64;  // cold windows read back and scored at a time

}  // namespace

double RecallSource::Prepare(const ScoreStep& step, const ResidentReader& cache,
                             ThreadPool& pool) {
  const WindowTable& table = cache.table();
  const int n_layers = table.n_layers();
  scores_.resize(n_layers);
  cold_.resize(n_layers);
  read_bytes_.assign(n_layers, 0);
  last_read_bytes_ = 0;
  // Every step shows the policy the cold windows; only a prompt batch's step scores them.
  for (int layer = 0; layer < n_layers; ++layer) {
    if (wanted_) {
      DescribeCold(table, layer);
    } else {
      cold_[layer].clear();
    }
  }
  // A prompt batch's step ranks by the prompt's last queries; a decoding step by the last
  // generated token's (what the next tokens are about to read).
  decode_step_ = step.trigger == BatchKind::kGenerated;
  active_ = wanted_ && step.limited && disk_ != nullptr &&
            (decode_step_ ? std::any_of(has_last_.begin(), has_last_.end(), [](uint8_t h) { return h != 0; })
                          : cache.observation().held());
  if (!active_) {
    for (auto& s : scores_) s.clear();
    return 0.0;
  }
  pool.ParallelFor(n_layers, 1, [&](int64_t first, int64_t last) {
    for (int64_t l = first; l < last; ++l) ComputeLayer(static_cast<int>(l), cache);
  });
  last_read_bytes_ = std::accumulate(read_bytes_.begin(), read_bytes_.end(), int64_t{0});
  if (decode_step_) {
    shared_.clear();
  } else {
    ComputeShared(cache);
  }
  return 0.0;
}

void RecallSource::ComputeShared(const ResidentReader& cache) {
  const WindowTable& table = cache.table();
  shared_.clear();
  if (shared_count_ <= 0) return;
  // A window some layer's recall found among its cold windows, by the largest share of that
  // layer's best score it reached in any layer: the windows the question reaches through the
  // few layers whose heads retrieve.
  std::vector<double> best;
  std::vector<uint8_t> found;
  for (int layer = 0; layer < table.n_layers(); ++layer) {
    const std::vector<float>& scores = scores_[layer];
    const int64_t limit =
        std::min<int64_t>(table.FirstRecentIndex(table.layer(layer).count),
                          static_cast<int64_t>(scores.size()));
    if (static_cast<int64_t>(best.size()) < limit) {
      best.resize(limit, 0.0);
      found.resize(limit, 0);
    }
    float top = 0.0f;
    for (int64_t i = 0; i < limit; ++i) top = std::max(top, scores[i]);
    if (top <= 0.0f) continue;
    for (int64_t i = 0; i < limit; ++i) best[i] = std::max(best[i], double{scores[i]} / top);
    for (const ColdWindow& c : cold_[layer]) {
      if (c.candidate && c.index < limit) found[c.index] = 1;
    }
  }
  std::vector<int64_t> order;
  for (int64_t i = 0; i < static_cast<int64_t>(best.size()); ++i) {
    if (found[i] && best[i] > 0.0) order.push_back(i);
  }
  const int64_t n = std::min<int64_t>(shared_count_, static_cast<int64_t>(order.size()));
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int64_t a, int64_t b) {
    return best[a] != best[b] ? best[a] > best[b] : a > b;
  });
  shared_.assign(order.begin(), order.begin() + n);
}

void RecallSource::ComputeLayer(int layer, const ResidentReader& cache) {
  const KvGeometry& geo = cache.geometry();
  const WindowTable& table = cache.table();
  const ObservationBuffer& obs = cache.observation();
  const LayerWindows& l = table.layer(layer);
  const int hd = geo.head_dim, n_heads = geo.n_heads, n_kv = geo.n_kv_heads;
  const int group = n_heads / n_kv;
  const int window = table.window();
  const int sink = table.SinkTokens(l);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // The queries that rank: the prompt's last ones, or the last generated token's.
  // (ScoreBatch: the last rows of a prompt batch, before it attends.)
  const bool decode = decode_step_ && batch_q_ == nullptr;
  const int64_t row = int64_t{n_heads} * hd;
  const int batch_rows = batch_q_ != nullptr ? std::min(batch_n_, obs.capacity()) : 0;
  const int n_obs = batch_q_ != nullptr ? batch_rows
                    : decode            ? (has_last_[layer] ? 1 : 0)
                                        : obs.filled(layer);
  auto query = [&](int s) {
    return batch_q_ != nullptr ? batch_q_ + (batch_n_ - batch_rows + s) * row
           : decode            ? last_q_[layer].data()
                               : obs.query(layer, s);
  };
  auto position = [&](int s) {
    return batch_q_ != nullptr ? batch_pos_[batch_n_ - batch_rows + s]
           : decode            ? last_pos_[layer]
                               : obs.position(layer, s);
  };
  const int candidates = decode ? std::max(1, candidates_ / 4) : candidates_;
  if (!decode && batch_q_ == nullptr && ReuseBatchScores(layer, obs)) return;
  const int64_t n_res = table.ResidentTokens(l);
  std::vector<float>& scores = scores_[layer];
  scores.assign(static_cast<size_t>(table.CreatedWindows(l)), 0.0f);
  if (n_obs == 0) return;

  // 1. Exact logits of the resident keys each observed query sees, [kv head][s][j][resident
  // token] with h = kv head * group + j: a KV head's query rows lie n_res apart, so one call
  // scores them all in place (a quantized window is dequantized and rotated once for them all,
  // not once a query) over the most any of them sees; what a row does not see is then unset.
  thread_local std::vector<float> logits, row_max;
  thread_local std::vector<int64_t> visible;
  logits.assign(static_cast<size_t>(n_obs) * n_heads * n_res,
                -std::numeric_limits<float>::infinity());
  row_max.assign(static_cast<size_t>(n_obs) * n_heads, -std::numeric_limits<float>::infinity());
  visible.resize(n_obs);
  int64_t most_visible = 0;
  for (int s = 0; s < n_obs; ++s) {
    visible[s] = table.VisibleTo(l, position(s));
    most_visible = std::max(most_visible, visible[s]);
  }
  QEVICT_CHECK(most_visible <= n_res);
  const auto resident_logits = [&](int s, int h) {
    return logits.data() +
           ((static_cast<int64_t>(h / group) * n_obs + s) * group + h % group) * n_res;
  };
  thread_local std::vector<float> group_q;
  if (most_visible > 0) {
    const int64_t n_rows = static_cast<int64_t>(n_obs) * group;
    group_q.resize(static_cast<size_t>(n_rows * hd));
    for (int g = 0; g < n_kv; ++g) {
      for (int s = 0; s < n_obs; ++s) {
        std::copy_n(query(s) + static_cast<int64_t>(g) * group * hd, group * hd,
                    group_q.data() + static_cast<int64_t>(s) * group * hd);
      }
      cache.ScoreRange(layer, g, 0, most_visible, group_q.data(), static_cast<int>(n_rows),
                       resident_logits(0, g * group), n_res, scale);
      for (int s = 0; s < n_obs; ++s) {
        for (int j = 0; j < group; ++j) {
          const int h = g * group + j;
          float* x = resident_logits(s, h);
          std::fill(x + visible[s], x + most_visible, -std::numeric_limits<float>::infinity());
          if (visible[s] > 0) row_max[static_cast<int64_t>(s) * n_heads + h] = MaxOf(x, visible[s]);
        }
      }
    }
  }

  // 2. The candidates: at a prompt with `scan_`, every cold window the queries can see; else the
  // cold windows whose digest estimate of their largest logit stands highest above what each
  // query already attends.
  const int64_t n_cold = static_cast<int64_t>(l.cold.size());
  thread_local std::vector<std::pair<float, int64_t>> ranked;
  ranked.clear();
  const int32_t last_pos = n_obs > 0 ? position(n_obs - 1) : 0;
  if (scan_ && !decode) {
    for (int64_t k = 0; k < n_cold; ++k) {
      if (table.position(table.FirstToken(l.cold[k].index)) <= last_pos) ranked.emplace_back(0.0f, k);
    }
  } else {
    std::vector<const float*> qs(n_obs);
    std::vector<int32_t> ps(n_obs);
    for (int s = 0; s < n_obs; ++s) qs[s] = query(s), ps[s] = position(s);
    ShortlistByDigest(table, l, qs, ps, row_max, n_heads, n_kv, hd, scale, candidates, ranked);
  }
  const int64_t n_cand = static_cast<int64_t>(ranked.size());
  // Read in slot order (runs of consecutive slots are one read).
  std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    return l.cold[a.second].slot < l.cold[b.second].slot;
  });

  // 3. The candidates' exact keys, read back kChunk windows at a time (the scratch stays a few
  // hundred KiB whatever the context), each chunk's logits reduced at once to every window's
  // sum of exp(logit - the chunk's max) per query and head: [s][h][candidate], and that max.
  const int64_t block_bytes = disk_->block_bytes();
  const int64_t n_chunks = (n_cand + kChunk - 1) / kChunk;
  thread_local std::vector<float> cand_sum;   // [s][h][candidate]
  thread_local std::vector<float> chunk_max;  // [s][h][chunk]
  const int64_t rows_sh = static_cast<int64_t>(n_obs) * n_heads;
  cand_sum.assign(static_cast<size_t>(rows_sh * n_cand), 0.0f);
  chunk_max.assign(static_cast<size_t>(rows_sh * n_chunks), -std::numeric_limits<float>::infinity());
  read_bytes_[layer] = n_cand * block_bytes;
  // Chunks are independent (each writes its candidates' sums and its own maxima): a batch's scan
  // before it attends runs them on the pool (batch_pool_); a routing step, already parallel over
  // layers, runs them in turn. The scratch of a chunk is its thread's.
  float* const sums_out = cand_sum.data();
  float* const max_out = chunk_max.data();
  // (`ranked` is this thread's: the chunks read it through a plain reference.)
  const std::vector<std::pair<float, int64_t>>& cands = ranked;
  auto scan_chunk = [&, sums_out, max_out](int64_t chunk) {
    thread_local std::vector<uint8_t> blocks;
    thread_local std::vector<int32_t> slots;
    thread_local std::vector<uint64_t> tags;
    thread_local std::vector<uint16_t> keys;      // [kv head][chunk token][head_dim] fp16
    thread_local std::vector<float> cand;         // [s][h][chunk token]
    thread_local std::vector<int32_t> first_pos;  // [chunk window] its first position
    const int64_t c0 = chunk * kChunk, nc = std::min(kChunk, n_cand - c0);
    const int64_t n_ct = nc * window;
    keys.resize(static_cast<size_t>(n_kv) * n_ct * hd);
    slots.resize(nc);
    tags.resize(nc);
    for (int64_t c = 0; c < nc; ++c) {
      const ColdRecord& record = l.cold[cands[c0 + c].second];
      slots[c] = record.slot;
      tags[c] = ColdBlockTag(layer, record.index);
    }
    blocks.resize(static_cast<size_t>(nc * block_bytes));
    disk_->ReadBlocks(slots, tags, blocks.data());
    cand.assign(static_cast<size_t>(rows_sh * n_ct), -std::numeric_limits<float>::infinity());
    // Each KV head's keys of the chunk, gathered from the blocks ([kv head][token][head_dim]
    // first in a block), so that one fp16 kernel call scores a query group against all of them.
    for (int64_t c = 0; c < nc; ++c) {
      const uint16_t* block = reinterpret_cast<const uint16_t*>(blocks.data() + c * block_bytes);
      for (int g = 0; g < n_kv; ++g) {
        std::copy_n(block + static_cast<int64_t>(g) * window * hd, window * hd,
                    keys.data() + (static_cast<int64_t>(g) * n_ct + c * window) * hd);
      }
    }
    first_pos.resize(nc);
    for (int64_t c = 0; c < nc; ++c) {
      first_pos[c] = table.position(table.FirstToken(l.cold[cands[c0 + c].second].index));
    }
    for (int s = 0; s < n_obs; ++s) {
      const float* q = query(s);
      for (int g = 0; g < n_kv; ++g) {
        float* rows = cand.data() + (static_cast<int64_t>(s) * n_heads + g * group) * n_ct;
        ScoreFp16Keys(q + static_cast<int64_t>(g) * group * hd, group,
                      keys.data() + static_cast<int64_t>(g) * n_ct * hd, hd, n_ct, hd, scale,
                      rows, n_ct);
        // A window after the query (never, for cold windows, but cheap to honour) is unseen.
        for (int64_t c = 0; c < nc; ++c) {
          if (first_pos[c] <= position(s)) continue;
          for (int j = 0; j < group; ++j) {
            std::fill_n(rows + j * n_ct + c * window, window,
                        -std::numeric_limits<float>::infinity());
          }
        }
      }
    }
    for (int64_t sh = 0; sh < rows_sh; ++sh) {
      float* x = cand.data() + sh * n_ct;
      const float m = MaxOf(x, n_ct);
      if (!std::isfinite(m)) continue;
      max_out[sh * n_chunks + chunk] = m;
      ExpShiftSum(x, n_ct, m);
      // Each window's sum, in token order (no division per token: this loop runs for every
      // query, head and cold token of a scan).
      float* sums = sums_out + sh * n_cand + c0;
      for (int64_t c = 0; c < nc; ++c) {
        const float* xc = x + c * window;
        float sum = sums[c];
        for (int t = 0; t < window; ++t) sum += xc[t];
        sums[c] = sum;
      }
    }
  };
  if (batch_pool_ != nullptr && n_chunks > 1) {
    batch_pool_->ParallelFor(n_chunks, 1, [&](int64_t first, int64_t last) {
      for (int64_t chunk = first; chunk < last; ++chunk) scan_chunk(chunk);
    });
  } else {
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) scan_chunk(chunk);
  }

  // 4. One softmax over resident and candidate keys per query and head; each window's share,
  // averaged over a KV head's query heads and summed over queries, the largest over KV heads.
  thread_local std::vector<float> by_head;  // [kv head][resident windows | candidates]
  const int64_t n_win = static_cast<int64_t>(l.windows.size());
  const int64_t units = n_win + n_cand;
  by_head.assign(static_cast<size_t>(n_kv) * units, 0.0f);
  const float per_head = 1.0f / static_cast<float>(group);
  thread_local std::vector<float> chunk_scale;
  chunk_scale.resize(n_chunks);
  for (int s = 0; s < n_obs; ++s) {
    for (int h = 0; h < n_heads; ++h) {
      const int64_t sh = static_cast<int64_t>(s) * n_heads + h;
      float* res = resident_logits(s, h);
      const float* cm = chunk_max.data() + sh * n_chunks;
      const int64_t vis = visible[s];
      float m = vis > 0 ? row_max[sh] : -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < n_chunks; ++c) m = std::max(m, cm[c]);
      if (!std::isfinite(m)) continue;
      float z = vis > 0 ? ExpShiftSum(res, vis, m) : 0.0f;
      const float* sums = cand_sum.data() + sh * n_cand;
      for (int64_t c = 0; c < n_chunks; ++c) {
        chunk_scale[c] = std::isfinite(cm[c]) ? std::exp(cm[c] - m) : 0.0f;
        const int64_t c0 = c * kChunk, nc = std::min(kChunk, n_cand - c0);
        for (int64_t k = c0; k < c0 + nc; ++k) z += sums[k] * chunk_scale[c];
      }
      const float inv = per_head / z;
      float* out = by_head.data() + static_cast<int64_t>(h / group) * units;
      for (int64_t w0 = sink; w0 < vis; w0 += window) {  // each resident window in turn
        float* o = out + (w0 - sink) / window;
        const int64_t end = std::min<int64_t>(vis, w0 + window);
        for (int64_t t = w0; t < end; ++t) *o += res[t] * inv;
      }
      for (int64_t k = 0; k < n_cand; ++k) out[n_win + k] += sums[k] * chunk_scale[k / kChunk] * inv;
    }
  }
  auto best_head = [&](int64_t unit) {
    float b = 0.0f;
    for (int g = 0; g < n_kv; ++g) b = std::max(b, by_head[static_cast<size_t>(g) * units + unit]);
    return b;
  };
  for (int64_t k = 0; k < n_win; ++k) scores[l.windows[k].index] = best_head(k);
  std::vector<ColdWindow>& cold = cold_[layer];
  for (int64_t c = 0; c < n_cand; ++c) scores[cold[ranked[c].second].index] = best_head(n_win + c);
  // Max-pooled over neighbouring windows (SnapKV pools over tokens; here over windows): a window
  // ranks with the one after it and the kFollow before it, so the words that complete what a
  // question points at (a value after its key) come back with it.
  thread_local std::vector<float> pooled;
  pooled = scores;
  const int64_t n_idx = static_cast<int64_t>(scores.size());
  for (int64_t i = 0; i < n_idx; ++i) {
    for (int64_t j = std::max<int64_t>(0, i - kFollow); j < i; ++j) {
      pooled[i] = std::max(pooled[i], scores[j]);
    }
    if (i + 1 < n_idx) pooled[i] = std::max(pooled[i], scores[i + 1]);
  }
  // Only windows that were scored keep a score (the rest cannot be chosen this step).
  for (int64_t k = 0; k < n_win; ++k) {
    const int64_t i = l.windows[k].index;
    scores[i] = pooled[i];
  }
  for (int64_t c = 0; c < n_cand; ++c) {
    ColdWindow& w = cold[ranked[c].second];
    w.candidate = true;
    w.score = pooled[w.index];
    scores[w.index] = w.score;
  }
  // Back to the allocator once large (util/scratch.h): at a prompt's end on a long context
  // these are megabytes per thread.
  ReleaseIfLarge(logits);
  ReleaseIfLarge(row_max);
  ReleaseIfLarge(group_q);
  ReleaseIfLarge(ranked);
  ReleaseIfLarge(cand_sum);
  ReleaseIfLarge(chunk_max);
  ReleaseIfLarge(by_head);
  ReleaseIfLarge(pooled);
}

// The `candidates` cold windows of l to read back: the best half by how far their digest's
// estimate of their largest logit stands above what each query (rows of n_heads, at positions)
// already attends (row_max, [s][h]), then their cold neighbours: a question's attention finds a
// fact's key words, and the words that complete it (the value asked for) usually sit in the
// next window.
void RecallSource::ShortlistByDigest(const WindowTable& table, const LayerWindows& l,
                                     std::span<const float* const> queries,
                                     std::span<const int32_t> positions,
                                     std::span<const float> row_max, int n_heads, int n_kv,
                                     int hd, float scale, int candidates,
                                     std::vector<std::pair<float, int64_t>>& ranked) const {
  const int n_obs = static_cast<int>(queries.size());
  const int group = n_heads / n_kv;
  const int64_t n_cold = static_cast<int64_t>(l.cold.size());
  const DigestGeometry dg{n_kv, hd, table.window()};
  const DigestContext* context = l.has_digest_context ? &l.digest_context : nullptr;
  // The windows of a digest group share one digest (they come in index order, so a group's are
  // consecutive): its estimates for every query and head are computed at the group's first
  // window and reused for the others.
  // Every row [s][h] against every digest: what depends on the queries alone is prepared once.
  const uint8_t* estimated = nullptr;
  std::vector<const float*> rows(static_cast<size_t>(n_obs) * n_heads);
  std::vector<int> kv_heads(rows.size());
  for (int s = 0; s < n_obs; ++s) {
    for (int h = 0; h < n_heads; ++h) {
      rows[s * n_heads + h] = queries[s] + static_cast<int64_t>(h) * hd;
      kv_heads[s * n_heads + h] = h / group;
    }
  }
  const DigestEstimator estimator(kind_, dg, context, rows, kv_heads);
  thread_local std::vector<float> estimates;
  estimates.resize(rows.size());
  for (int64_t k = 0; k < n_cold; ++k) {
    const uint8_t* digest = table.Digest(l, static_cast<size_t>(k));
    if (digest != estimated) {
      estimator.Estimate(digest, estimates.data());
      for (float& e : estimates) e *= scale;
      estimated = digest;
    }
    const int32_t first_pos = table.position(table.FirstToken(l.cold[k].index));
    float best = -std::numeric_limits<float>::infinity();
    for (int s = 0; s < n_obs; ++s) {
      if (first_pos > positions[s]) continue;
      for (int h = 0; h < n_heads; ++h) {
        best = std::max(best, estimates[s * n_heads + h] - row_max[s * n_heads + h]);
      }
    }
    if (best > -std::numeric_limits<float>::infinity()) ranked.emplace_back(best, k);
  }
  const int64_t n_best =
      std::min<int64_t>((candidates + 1) / 2, static_cast<int64_t>(ranked.size()));
  std::partial_sort(ranked.begin(), ranked.begin() + n_best, ranked.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  ranked.resize(n_best);
  std::vector<uint8_t> chosen(static_cast<size_t>(n_cold), 0);
  for (const auto& r : ranked) chosen[r.second] = 1;
  for (int64_t i = 0; i < n_best && static_cast<int64_t>(ranked.size()) < candidates; ++i) {
    const int64_t k = ranked[i].second;
    for (int64_t nb : {k + 1, k - 1}) {
      if (nb < 0 || nb >= n_cold || chosen[nb]) continue;
      if (std::abs(l.cold[nb].index - l.cold[k].index) != std::abs(nb - k)) continue;
      if (static_cast<int64_t>(ranked.size()) >= candidates) break;
      chosen[nb] = 1;
      ranked.emplace_back(ranked[i].first, nb);
    }
  }
}

void RecallSource::DescribeCold(const WindowTable& table, int layer) {
  const LayerWindows& l = table.layer(layer);
  std::vector<ColdWindow>& cold = cold_[layer];
  cold.resize(l.cold.size());
  for (size_t k = 0; k < cold.size(); ++k) {
    cold[k] = ColdWindow{l.cold[k].index, table.position(table.FirstToken(l.cold[k].index)),
                         false, 0.0f};
  }
}

void RecallSource::ScoreBatch(int layer, const ResidentReader& cache, int n, const int32_t* pos,
                              const float* q, ThreadPool& pool) {
  DescribeCold(cache.table(), layer);
  batch_q_ = q, batch_pos_ = pos, batch_n_ = n;
  batch_pool_ = &pool;
  ComputeLayer(layer, cache);
  batch_q_ = nullptr;
  batch_pool_ = nullptr;
  const int rows = std::min(n, cache.observation().capacity());
  batch_rows_[layer] = rows > 0 ? BatchRows{rows, pos[n - rows], pos[n - 1]} : BatchRows{};
}

bool RecallSource::ReuseBatchScores(int layer, const ObservationBuffer& obs) {
  const BatchRows rows = batch_rows_[layer];
  batch_rows_[layer] = BatchRows{};
  const int filled = obs.filled(layer);
  if (!scan_ || rows.n == 0 || filled != rows.n) return false;
  int32_t first = obs.position(layer, 0), last = first;
  for (int s = 1; s < filled; ++s) {
    first = std::min(first, obs.position(layer, s));
    last = std::max(last, obs.position(layer, s));
  }
  if (first != rows.first || last != rows.last) return false;
  // Every cold window the queries see was scored then, as a cold candidate or a resident one.
  const std::vector<float>& scores = scores_[layer];
  for (ColdWindow& c : cold_[layer]) {
    if (c.first_pos > last || c.index >= static_cast<int64_t>(scores.size())) continue;
    c.candidate = true;
    c.score = scores[c.index];
  }
  read_bytes_[layer] = 0;
  return true;
}

void RecallSource::Configure(int n_layers, int n_heads, int head_dim) {
  scores_.resize(n_layers);
  cold_.resize(n_layers);
  read_bytes_.assign(n_layers, 0);
  batch_rows_.assign(n_layers, BatchRows{});
  last_q_.assign(wanted_ ? n_layers : 0, std::vector<float>(static_cast<size_t>(n_heads) * head_dim));
  last_pos_.assign(last_q_.size(), 0);
  has_last_.assign(last_q_.size(), 0);
}

void RecallSource::RememberQuery(int layer, int n, const int32_t* pos, const float* q) {
  if (n <= 0 || last_q_.empty()) return;
  std::vector<float>& row = last_q_[layer];
  std::copy_n(q + static_cast<int64_t>(n - 1) * row.size(), row.size(), row.begin());
  last_pos_[layer] = pos[n - 1];
  has_last_[layer] = 1;
}

void RecallSource::Forget() {
  std::fill(has_last_.begin(), has_last_.end(), 0);
  std::fill(batch_rows_.begin(), batch_rows_.end(), BatchRows{});
}

void RecallSource::Describe(int layer, const ResidentReader& cache, std::span<BandWindow> windows,
                            LayerBand& band) const {
  if (!wanted_) return;
  band.cold = cold_[layer];
  if (active_) {
    band.recall = scores_[layer];
    band.shared = shared_;
  }
}

void RecallSource::Consumed(const ScoreStep& step) { active_ = false; }

}  // namespace qevict
