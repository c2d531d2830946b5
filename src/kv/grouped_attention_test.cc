// GroupedAttentionOverPrefix against a double-precision dense softmax, on fp16 keys and values,
// for every path: decode (key ranges split over threads and merged), a few queries (one item
// each), and prompt chunks (blocks of query tokens per KV head), including sliding windows,
// long rows and scores that grow along the keys.
#include "kv/grouped_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "util/fp16.h"

namespace qevict {
namespace {

struct Case {
  int n_heads, n_kv_heads, head_dim;
  int64_t n_keys;
  int n_queries;
  bool sliding;  // query i attends [first_key[i], visible[i]) instead of [0, visible[i])
};

class GroupedAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(GroupedAttentionTest, MatchesDenseSoftmax) {
  const Case c = GetParam();
  const int hd = c.head_dim, n_kv = c.n_kv_heads, group = c.n_heads / c.n_kv_heads;
  KvGeometry geo;
  geo.n_layers = 1;
  geo.n_heads = c.n_heads;
  geo.n_kv_heads = n_kv;
  geo.head_dim = hd;
  geo.max_tokens = c.n_keys;
  std::mt19937 rng(static_cast<uint32_t>(c.n_keys * 31 + c.n_queries));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // keys[h][j][d], values[h][j][d] in fp16; key norms grow along j so that later tiles hold
  // larger scores than earlier ones.
  std::vector<uint16_t> keys(static_cast<size_t>(n_kv) * c.n_keys * hd);
  std::vector<uint16_t> values(keys.size());
  for (int h = 0; h < n_kv; ++h) {
    for (int64_t j = 0; j < c.n_keys; ++j) {
      const float growth = 0.5f + 2.0f * static_cast<float>(j) / static_cast<float>(c.n_keys);
      for (int d = 0; d < hd; ++d) {
        const size_t at = (static_cast<size_t>(h) * c.n_keys + j) * hd + d;
        keys[at] = Fp32ToFp16(normal(rng) * growth);
        values[at] = Fp32ToFp16(normal(rng));
      }
    }
  }
  std::vector<float> q(static_cast<size_t>(c.n_queries) * c.n_heads * hd);
  for (float& x : q) x = normal(rng);
  // The last query sees every key; earlier ones one key fewer each (a causal prompt chunk).
  std::vector<int64_t> visible(c.n_queries), first(c.n_queries);
  for (int i = 0; i < c.n_queries; ++i) {
    visible[i] = c.n_keys - (c.n_queries - 1 - i);
    first[i] = c.sliding ? std::max<int64_t>(0, visible[i] - 300) : 0;
  }
  auto key = [&](int h, int64_t j) { return keys.data() + (static_cast<size_t>(h) * c.n_keys + j) * hd; };
  auto value = [&](int h, int64_t j) { return values.data() + (static_cast<size_t>(h) * c.n_keys + j) * hd; };
  auto score = [&](int h, int64_t begin, int64_t end, const float* qg, int n_q, float* scores,
                   int64_t ld, float scale) {
    ScoreFp16Keys(qg, n_q, key(h, begin), hd, end - begin, hd, scale, scores, ld);
  };
  auto accumulate = [&](int h, int64_t begin, int64_t end, const float* p, int n_q, int64_t ld,
                        float* acc) {
    AccumulateFp16Values(p, n_q, ld, value(h, begin), hd, end - begin, hd, acc);
  };
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(q.size(), -1.0f);
    NoAttentionObserver none;
    GroupedAttentionOverPrefix(geo, c.n_queries, visible.data(), q.data(), out.data(), pool,
                               score, accumulate, none, c.sliding ? first.data() : nullptr);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (int i = 0; i < c.n_queries; ++i) {
      for (int hq = 0; hq < c.n_heads; ++hq) {
        const int h = hq / group;
        const float* qi = q.data() + (static_cast<size_t>(i) * c.n_heads + hq) * hd;
        std::vector<double> s;
        double mx = -INFINITY;
        for (int64_t j = first[i]; j < visible[i]; ++j) {
          double dot = 0.0;
          for (int d = 0; d < hd; ++d) dot += qi[d] * static_cast<double>(Fp16ToFp32(key(h, j)[d]));
          s.push_back(dot * scale);
          mx = std::max(mx, s.back());
        }
        double total = 0.0;
        for (double& x : s) total += (x = std::exp(x - mx));
        const float* got = out.data() + (static_cast<size_t>(i) * c.n_heads + hq) * hd;
        for (int d = 0; d < hd; ++d) {
          double want = 0.0, mag = 0.0;
          for (size_t k = 0; k < s.size(); ++k) {
            const double v = Fp16ToFp32(value(h, first[i] + static_cast<int64_t>(k))[d]);
            want += s[k] * v;
            mag += s[k] * std::fabs(v);
          }
          ASSERT_NEAR(got[d], want / total, 1e-5 * mag / total + 1e-6)
              << "threads " << threads << " query " << i << " head " << hq << " dim " << d;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, GroupedAttentionTest,
    ::testing::Values(Case{9, 3, 64, 1500, 1, false},    // decode: key ranges split
                      Case{9, 3, 64, 700, 5, false},     // a few queries, one item each
                      Case{9, 3, 64, 1500, 40, false},   // prompt chunk: query blocks
                      Case{8, 2, 128, 900, 17, false},   // head_dim 128
                      Case{4, 1, 256, 700, 24, true},    // sliding windows of 300 keys
                      Case{6, 3, 64, 100, 16, false}));  // the shortest blocked chunk

}  // namespace
}  // namespace qevict
