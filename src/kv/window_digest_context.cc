// DigestContext (window_digest.h): the per-layer part of the context kinds, fitted once from a
// layer's keys (and, for the low-rank kinds, its queries), written and read back.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kv/window_digest.h"
#include "util/error.h"
#include "util/fp16.h"

namespace qevict {
namespace {

// v as the fp16 value nearest it, and a scale at least fp16's smallest normal and at most its
// largest finite value.
float AsFp16(float v) { return Fp16ToFp32(Fp32ToFp16(v)); }
float AsFp16Scale(float v) {
  return std::clamp(AsFp16(v), Fp16ToFp32(0x0400u), Fp16ToFp32(0x7BFFu));
}

// The eigenvalues and eigenvectors of the symmetric n x n matrix a (row-major; destroyed) by
// cyclic Jacobi rotations: vectors[r * n + i] is row r of eigenvector i, values[i] its value.
void SymmetricEigen(std::vector<double>& a, int n, std::vector<double>* vectors,
                    std::vector<double>* values) {
  std::vector<double>& v = *vectors;
  v.assign(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i) * n + i] = 1;
  auto at = [n](std::vector<double>& m, int r, int c) -> double& {
    return m[static_cast<size_t>(r) * n + c];
  };
  double total = 0;
  for (double x : a) total += x * x;
  for (int sweep = 0; sweep < 60; ++sweep) {
    double off = 0;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) off += 2 * at(a, p, q) * at(a, p, q);
    }
    if (off <= 1e-24 * total) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        const double apq = at(a, p, q);
        if (std::fabs(apq) <= 1e-300) continue;
        // The rotation that zeroes a[p][q]: t = tan(angle), the smaller root.
        const double theta = (at(a, q, q) - at(a, p, p)) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::hypot(theta, 1.0));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // a J
          const double kp = at(a, k, p), kq = at(a, k, q);
          at(a, k, p) = c * kp - s * kq;
          at(a, k, q) = s * kp + c * kq;
        }
        for (int k = 0; k < n; ++k) {  // J^T a
          const double pk = at(a, p, k), qk = at(a, q, k);
          at(a, p, k) = c * pk - s * qk;
          at(a, q, k) = s * pk + c * qk;
        }
        for (int k = 0; k < n; ++k) {  // v J
          const double kp = at(v, k, p), kq = at(v, k, q);
          at(v, k, p) = c * kp - s * kq;
          at(v, k, q) = s * kp + c * kq;
        }
      }
    }
  }
  values->resize(n);
  for (int i = 0; i < n; ++i) (*values)[i] = at(a, i, i);
}

}  // namespace

DigestContext DigestContext::Fit(const DigestGeometry& g, const float* keys, int n_windows,
                                 int rank, const float* queries, int n_queries, int n_heads) {
  // The geometry WindowDigest accepts.
  QEVICT_CHECK(g.n_kv_heads > 0 && g.head_dim > 0 && g.head_dim % 8 == 0 && g.window_tokens > 0);
  QEVICT_CHECK(n_windows >= 1 && rank >= 0 && rank <= g.head_dim);
  if (rank > 0 && (queries == nullptr || n_queries < 1 || n_heads < g.n_kv_heads ||
                   n_heads % g.n_kv_heads != 0)) {
    throw Error("digest context: a rank-" + std::to_string(rank) +
                " context is fitted on the layer's queries too (a whole number of query heads "
                "per KV head), and none were given");
  }
  const int n = g.n_kv_heads, d = g.head_dim, w = g.window_tokens;
  DigestContext cx;
  cx.n_kv_heads_ = n;
  cx.head_dim_ = d;
  cx.rank_ = rank;
  const int64_t block = static_cast<int64_t>(n) * w * d;
  for (int h = 0; h < n; ++h) {
    // The windows' mean keys of this head, [n_windows][d].
    std::vector<double> means(static_cast<size_t>(n_windows) * d);
    std::vector<double> offset(d, 0.0);
    for (int i = 0; i < n_windows; ++i) {
      const float* head = keys + i * block + static_cast<int64_t>(h) * w * d;
      for (int c = 0; c < d; ++c) {
        double m = 0;
        for (int t = 0; t < w; ++t) m += head[static_cast<int64_t>(t) * d + c];
        means[static_cast<size_t>(i) * d + c] = m / w;
        offset[c] += m / w / n_windows;
      }
    }
    for (int c = 0; c < d; ++c) cx.offset_.push_back(AsFp16(static_cast<float>(offset[c])));
    if (rank == 0) {
      std::vector<double> sd(d, 0.0);
      for (int i = 0; i < n_windows; ++i) {
        for (int c = 0; c < d; ++c) {
          const double x = means[static_cast<size_t>(i) * d + c] - offset[c];
          sd[c] += x * x / n_windows;
        }
      }
      double largest = 0;
      for (int c = 0; c < d; ++c) largest = std::max(largest, sd[c] = std::sqrt(sd[c]));
      for (int c = 0; c < d; ++c) {
        cx.scale_.push_back(AsFp16Scale(static_cast<float>(std::max(sd[c], 1e-3 * largest))));
      }
      continue;
    }
    std::vector<double> cov(static_cast<size_t>(d) * d, 0.0);
    for (int i = 0; i < n_windows; ++i) {
      const double* m = means.data() + static_cast<size_t>(i) * d;
      for (int a = 0; a < d; ++a) {
        const double xa = m[a] - offset[a];
        for (int b = a; b < d; ++b) cov[static_cast<size_t>(a) * d + b] += xa * (m[b] - offset[b]);
      }
    }
    for (int a = 0; a < d; ++a) {
      for (int b = a; b < d; ++b) {
        cov[static_cast<size_t>(a) * d + b] /= n_windows;
        cov[static_cast<size_t>(b) * d + a] = cov[static_cast<size_t>(a) * d + b];
      }
    }
    // Q = E[q q^T] over the queries that read this KV head, made definite.
    const int group = n_heads / n;
    std::vector<double> qq(static_cast<size_t>(d) * d, 0.0);
    for (int i = 0; i < n_queries; ++i) {
      for (int hq = h * group; hq < (h + 1) * group; ++hq) {
        const float* qv = queries + (static_cast<int64_t>(i) * n_heads + hq) * d;
        for (int a = 0; a < d; ++a) {
          for (int b = a; b < d; ++b) qq[static_cast<size_t>(a) * d + b] += double{qv[a]} * qv[b];
        }
      }
    }
    double trace = 0;
    for (int a = 0; a < d; ++a) {
      for (int b = a; b < d; ++b) {
        qq[static_cast<size_t>(a) * d + b] /= static_cast<double>(n_queries) * group;
        qq[static_cast<size_t>(b) * d + a] = qq[static_cast<size_t>(a) * d + b];
      }
      trace += qq[static_cast<size_t>(a) * d + a];
    }
    const double ridge = std::max(1e-4 * trace / d, 1e-30);
    for (int a = 0; a < d; ++a) qq[static_cast<size_t>(a) * d + a] += ridge;
    std::vector<double> qvec, qval;
    SymmetricEigen(qq, d, &qvec, &qval);
    // Q^1/2 and Q^-1/2, from Q = V diag(l) V^T.
    std::vector<double> root(static_cast<size_t>(d) * d, 0.0), inv_root(root.size(), 0.0);
    for (int k = 0; k < d; ++k) {
      const double l = std::max(qval[k], ridge), sl = std::sqrt(l);
      for (int a = 0; a < d; ++a) {
        const double va = qvec[static_cast<size_t>(a) * d + k];
        for (int b = 0; b < d; ++b) {
          const double vv = va * qvec[static_cast<size_t>(b) * d + k];
          root[static_cast<size_t>(a) * d + b] += vv * sl;
          inv_root[static_cast<size_t>(a) * d + b] += vv / sl;
        }
      }
    }
    // M = Q^1/2 C Q^1/2, symmetric.
    std::vector<double> rc(static_cast<size_t>(d) * d, 0.0), m(rc.size(), 0.0);
    for (int a = 0; a < d; ++a) {
      for (int k = 0; k < d; ++k) {
        const double r = root[static_cast<size_t>(a) * d + k];
        for (int b = 0; b < d; ++b)
          rc[static_cast<size_t>(a) * d + b] += r * cov[static_cast<size_t>(k) * d + b];
      }
    }
    for (int a = 0; a < d; ++a) {
      for (int k = 0; k < d; ++k) {
        const double r = rc[static_cast<size_t>(a) * d + k];
        for (int b = 0; b < d; ++b)
          m[static_cast<size_t>(a) * d + b] += r * root[static_cast<size_t>(k) * d + b];
      }
    }
    for (int a = 0; a < d; ++a) {
      for (int b = a + 1; b < d; ++b) {
        const double avg =
            (m[static_cast<size_t>(a) * d + b] + m[static_cast<size_t>(b) * d + a]) / 2;
        m[static_cast<size_t>(a) * d + b] = m[static_cast<size_t>(b) * d + a] = avg;
      }
    }
    std::vector<double> vectors, values;
    SymmetricEigen(m, d, &vectors, &values);
    std::vector<int> order(d);
    for (int i = 0; i < d; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return values[a] > values[b]; });
    const double top = std::sqrt(std::max(0.0, values[order[0]]));
    for (int i = 0; i < rank; ++i) {
      // a_i = Q^1/2 u_i, b_i = Q^-1/2 u_i.
      for (int c = 0; c < d; ++c) {
        double ai = 0, bi = 0;
        for (int k = 0; k < d; ++k) {
          const double u = vectors[static_cast<size_t>(k) * d + order[i]];
          ai += root[static_cast<size_t>(c) * d + k] * u;
          bi += inv_root[static_cast<size_t>(c) * d + k] * u;
        }
        cx.basis_.push_back(AsFp16(static_cast<float>(ai)));
        cx.reconstruction_.push_back(AsFp16(static_cast<float>(bi)));
      }
      const double spread = std::sqrt(std::max(0.0, values[order[i]]));
      cx.component_scale_.push_back(
          AsFp16Scale(static_cast<float>(std::max({spread, 1e-3 * top, 1e-30}))));
    }
  }
  return cx;
}

void DigestContext::Write(ByteWriter& out) const {
  out.Pod(static_cast<int32_t>(n_kv_heads_));
  out.Pod(static_cast<int32_t>(head_dim_));
  out.Pod(static_cast<int32_t>(rank_));
  std::vector<uint16_t> half;
  for (const auto* part : {&offset_, &scale_, &basis_, &reconstruction_, &component_scale_}) {
    for (float v : *part) half.push_back(Fp32ToFp16(v));
  }
  out.Array(std::span<const uint16_t>(half));
}

DigestContext DigestContext::Read(ByteReader& in, const DigestGeometry& g) {
  // The geometry WindowDigest accepts.
  QEVICT_CHECK(g.n_kv_heads > 0 && g.head_dim > 0 && g.head_dim % 8 == 0 && g.window_tokens > 0);
  const int32_t n = in.Pod<int32_t>("digest context KV heads");
  const int32_t d = in.Pod<int32_t>("digest context head size");
  const int32_t rank = in.Pod<int32_t>("digest context rank");
  if (n != g.n_kv_heads || d != g.head_dim) {
    throw Error("digest context: written for " + std::to_string(n) + " KV heads x " +
                std::to_string(d) + ", read for " + std::to_string(g.n_kv_heads) + " x " +
                std::to_string(g.head_dim));
  }
  if (rank < 0 || rank > d) {
    throw Error("digest context: rank " + std::to_string(rank) + " of a head size " +
                std::to_string(d));
  }
  DigestContext cx;
  cx.n_kv_heads_ = n;
  cx.head_dim_ = d;
  cx.rank_ = rank;
  const size_t nd = static_cast<size_t>(n) * d;
  const size_t sizes[5] = {nd, rank == 0 ? nd : 0, nd * rank, nd * rank,
                           static_cast<size_t>(n) * rank};
  const size_t count = sizes[0] + sizes[1] + sizes[2] + sizes[3] + sizes[4];
  const std::vector<uint16_t> half = in.Array<uint16_t>("digest context values", count);
  if (half.size() != count) {
    throw Error("digest context: " + std::to_string(half.size()) + " values, " +
                std::to_string(count) + " expected");
  }
  std::vector<float>* parts[5] = {&cx.offset_, &cx.scale_, &cx.basis_, &cx.reconstruction_,
                                  &cx.component_scale_};
  size_t at = 0;
  for (int p = 0; p < 5; ++p) {
    const bool is_scale = p == 1 || p == 4;
    for (size_t i = 0; i < sizes[p]; ++i, ++at) {
      const float v = Fp16ToFp32(half[at]);
      if (!std::isfinite(v) || (is_scale && !(v > 0))) {
        throw Error("digest context: value " + std::to_string(at) + " is " + std::to_string(v) +
                    " (offsets and directions must be finite, scales positive and finite)");
      }
      parts[p]->push_back(v);
    }
  }
  return cx;
}

}  // namespace qevict
