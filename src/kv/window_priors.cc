#include "kv/window_priors.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace qevict {
namespace {

int64_t MaxIndex(std::span<const DenseWindow> windows) {
  int64_t limit = 0;
  for (const DenseWindow& w : windows) limit = std::max(limit, w.index + 1);
  return limit;
}

// Rotation of the pairs of x by (c, s) per pair, as Rope::Apply does with its tables (inverse:
// transpose = true rotates by -angle).
void RotatePairs(const RopeConfig& config, const float* c, const float* s, float* x,
                 bool transpose) {
  const int half = config.rot_dims / 2;
  for (int i = 0; i < half; ++i) {
    const int ia = config.neox ? i : 2 * i;
    const int ib = config.neox ? i + half : 2 * i + 1;
    const float a = x[ia], b = x[ib];
    if (transpose) {
      x[ia] = a * c[i] + b * s[i];
      x[ib] = b * c[i] - a * s[i];
    } else {
      x[ia] = a * c[i] - b * s[i];
      x[ib] = a * s[i] + b * c[i];
    }
  }
}

}  // namespace

void UnRotate(const Rope& rope, float* x, int32_t pos) {
  const int half = rope.config().rot_dims / 2;
  thread_local std::vector<float> row;
  row.resize(2 * static_cast<size_t>(half));
  rope.Row(pos, row.data(), row.data() + half);
  RotatePairs(rope.config(), row.data(), row.data() + half, x, /*transpose=*/true);
}

void KeyNormWindowScores(std::span<const float> keys, int n_kv, int head_dim,
                         std::span<const DenseWindow> windows, std::vector<float>* scores) {
  scores->assign(static_cast<size_t>(MaxIndex(windows)), 0.0f);
  const int64_t row = int64_t{n_kv} * head_dim;
  std::vector<double> norm(windows.size() * n_kv, 0.0);
  std::vector<double> least(n_kv, std::numeric_limits<double>::infinity());
  for (size_t k = 0; k < windows.size(); ++k) {
    const DenseWindow& w = windows[k];
    QEVICT_CHECK(w.tokens > 0 && (w.first + w.tokens) * row <= static_cast<int64_t>(keys.size()));
    for (int h = 0; h < n_kv; ++h) {
      double sum = 0.0;
      for (int t = 0; t < w.tokens; ++t) {
        const float* x = keys.data() + (w.first + t) * row + int64_t{h} * head_dim;
        double sq = 0.0;
        for (int d = 0; d < head_dim; ++d) sq += double{x[d]} * x[d];
        sum += std::sqrt(sq);
      }
      norm[k * n_kv + h] = sum / w.tokens;
      least[h] = std::min(least[h], norm[k * n_kv + h]);
    }
  }
  for (size_t k = 0; k < windows.size(); ++k) {
    float best = 0.0f;
    for (int h = 0; h < n_kv; ++h) {
      const double n = norm[k * n_kv + h];
      best = std::max(best, n > 0.0 ? static_cast<float>(least[h] / n) : 1.0f);
    }
    (*scores)[windows[k].index] = best;
  }
}

void ExpectedAttentionWindowScores(std::span<const float> keys, std::span<const float> values,
                                   std::span<const float> queries,
                                   std::span<const int32_t> query_pos, int n_heads, int n_kv,
                                   int head_dim, const Rope& rope, int64_t from_pos, int future,
                                   std::span<const DenseWindow> windows,
                                   std::vector<float>* scores) {
  scores->assign(static_cast<size_t>(MaxIndex(windows)), 0.0f);
  const int64_t m = static_cast<int64_t>(query_pos.size());
  const int64_t qrow = int64_t{n_heads} * head_dim, krow = int64_t{n_kv} * head_dim;
  const int64_t n_keys = static_cast<int64_t>(keys.size()) / krow;
  QEVICT_CHECK(m > 0 && static_cast<int64_t>(queries.size()) == m * qrow &&
               values.size() == keys.size() && n_heads % n_kv == 0);
  const RopeConfig& rc = rope.config();
  const int half = rc.rot_dims / 2;

  // The rotation averaged over the future positions (clipped to the tabulated ones).
  std::vector<float> cbar(half, 0.0f), sbar(half, 0.0f);
  const int64_t first = std::min<int64_t>(from_pos, rope.max_positions() - 1);
  const int64_t last = std::min<int64_t>(from_pos + future, rope.max_positions());
  const int64_t count = std::max<int64_t>(1, last - first);
  std::vector<float> c(half), s(half);
  for (int64_t t = first; t < first + count; ++t) {
    rope.Row(t, c.data(), s.data());
    for (int i = 0; i < half; ++i) {
      cbar[i] += c[i] / static_cast<float>(count);
      sbar[i] += s[i] / static_cast<float>(count);
    }
  }

  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const int group = n_heads / n_kv;
  std::vector<float> q(head_dim), mu(head_dim), var(head_dim), u(head_dim);
  std::vector<double> logit(n_keys), expected(static_cast<size_t>(n_kv) * n_keys, 0.0);
  for (int hq = 0; hq < n_heads; ++hq) {
    std::fill(mu.begin(), mu.end(), 0.0f);
    std::fill(var.begin(), var.end(), 0.0f);
    std::vector<double> sum(head_dim, 0.0), sq(head_dim, 0.0);
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(queries.data() + i * qrow + int64_t{hq} * head_dim, head_dim, q.begin());
      UnRotate(rope, q.data(), query_pos[i]);
      for (int d = 0; d < head_dim; ++d) {
        sum[d] += q[d];
        sq[d] += double{q[d]} * q[d];
      }
    }
    for (int d = 0; d < head_dim; ++d) {
      const double mean = sum[d] / m;
      mu[d] = static_cast<float>(mean);
      var[d] = static_cast<float>(std::max(0.0, sq[d] / m - mean * mean));
    }
    const int h = hq / group;
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t t = 0; t < n_keys; ++t) {
      // u = R_bar^T k: the key seen from the averaged future rotation.
      std::copy_n(keys.data() + t * krow + int64_t{h} * head_dim, head_dim, u.begin());
      RotatePairs(rc, cbar.data(), sbar.data(), u.data(), /*transpose=*/true);
      double lin = 0.0, quad = 0.0;
      for (int d = 0; d < head_dim; ++d) {
        lin += double{mu[d]} * u[d];
        quad += double{var[d]} * u[d] * u[d];
      }
      logit[t] = scale * lin + 0.5 * scale * scale * quad;
      top = std::max(top, logit[t]);
    }
    double z = 0.0;
    for (int64_t t = 0; t < n_keys; ++t) z += std::exp(logit[t] - top);
    for (int64_t t = 0; t < n_keys; ++t) {
      expected[h * n_keys + t] += std::exp(logit[t] - top) / z / group;
    }
  }
  for (const DenseWindow& w : windows) {
    QEVICT_CHECK(w.tokens > 0 && w.first + w.tokens <= n_keys);
    float best = 0.0f;
    for (int h = 0; h < n_kv; ++h) {
      double s = 0.0;
      for (int t = 0; t < w.tokens; ++t) {
        const float* v = values.data() + (w.first + t) * krow + int64_t{h} * head_dim;
        double vn = 0.0;
        for (int d = 0; d < head_dim; ++d) vn += double{v[d]} * v[d];
        s += expected[h * n_keys + w.first + t] * std::sqrt(vn);
      }
      best = std::max(best, static_cast<float>(s));
    }
    (*scores)[w.index] = best;
  }
}

}  // namespace qevict
