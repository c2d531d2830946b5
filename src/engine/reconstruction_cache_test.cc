// The reconstruction pass's view of a cache on synthetic keys: attention over the base cache's
// tokens and the pass's own (causal) equals a double-precision reference, and each base token's
// recorded score is the largest probability any query head of any query gave it.
#include "engine/reconstruction_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "kv/full_cache.h"
#include "util/thread_pool.h"

namespace qevict {
namespace {

TEST(ReconstructionCache, RecordsTheMaxProbabilityOfEveryBaseTokenAndAttendsExactly) {
  // One layer, two query heads sharing one KV head, head_dim 4. Data lives in channels 2-3,
  // which RoPE (rot_dims 2) leaves alone, and is exact in fp16.
  KvGeometry g;
  g.n_layers = 1;
  g.n_heads = 2;
  g.n_kv_heads = 1;
  g.head_dim = 4;
  g.max_tokens = 64;
  RopeConfig rc;
  rc.rot_dims = 2;
  auto rope = std::make_shared<Rope>(rc, 64);
  FullCache base(g, *rope);
  base.BeginRun(10, 0);
  const int T = 10, n = 16;
  std::vector<float> k(T * 4, 0.0f), v(T * 4, 0.0f);
  std::vector<int32_t> pos(T);
  for (int t = 0; t < T; ++t) {
    pos[t] = t;
    k[t * 4 + 2] = 0.25f * static_cast<float>(t % 5);
    k[t * 4 + 3] = t == 3 ? 4.0f : -0.5f;  // token 3: the key the queries look for
    v[t * 4 + 2] = static_cast<float>(t);
    v[t * 4 + 3] = 1.0f;
  }
  base.Store(0, T, pos.data(), k.data(), v.data());

  ModelConfig config;
  config.n_layers = 1;
  RopeTables ropes{rope, nullptr};
  ReconstructionCache view(base, config, g, ropes, {0});
  std::vector<float> nk(n * 4, 0.0f), nv(n * 4, 0.0f), q(n * 2 * 4, 0.0f), out(n * 2 * 4);
  std::vector<int32_t> npos(n);
  for (int i = 0; i < n; ++i) {
    npos[i] = T + i;
    nk[i * 4 + 2] = 0.5f;
    nk[i * 4 + 3] = 0.5f * static_cast<float>(i % 3);
    nv[i * 4 + 2] = -1.0f;
    q[(i * 2 + 0) * 4 + 3] = 0.5f * static_cast<float>(i % 4);  // head 0 looks at channel 3
    q[(i * 2 + 1) * 4 + 2] = 1.0f - 0.125f * static_cast<float>(i);  // head 1 at channel 2
  }
  ThreadPool pool(2);
  view.Store(0, n, npos.data(), nk.data(), nv.data());
  view.Attend(0, n, npos.data(), q.data(), out.data(), pool);

  std::vector<double> best(T, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < 2; ++h) {
      const float* qi = q.data() + (i * 2 + h) * 4;
      std::vector<double> logit;
      std::vector<const float*> values;
      for (int t = 0; t < T; ++t) {
        logit.push_back((qi[2] * k[t * 4 + 2] + qi[3] * k[t * 4 + 3]) / 2.0);
        values.push_back(v.data() + t * 4);
      }
      for (int j = 0; j <= i; ++j) {
        logit.push_back((qi[2] * nk[j * 4 + 2] + qi[3] * nk[j * 4 + 3]) / 2.0);
        values.push_back(nv.data() + j * 4);
      }
      double top = logit[0], z = 0.0;
      for (double x : logit) top = std::max(top, x);
      for (double x : logit) z += std::exp(x - top);
      double o2 = 0.0, o3 = 0.0;
      for (size_t r = 0; r < logit.size(); ++r) {
        const double p = std::exp(logit[r] - top) / z;
        if (r < static_cast<size_t>(T)) best[r] = std::max(best[r], p);
        o2 += p * values[r][2];
        o3 += p * values[r][3];
      }
      EXPECT_NEAR(out[(i * 2 + h) * 4 + 2], o2, 1e-4) << i << " " << h;
      EXPECT_NEAR(out[(i * 2 + h) * 4 + 3], o3, 1e-4) << i << " " << h;
    }
  }
  ASSERT_EQ(view.token_max().size(), 1u);
  ASSERT_EQ(view.token_max()[0].size(), static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) EXPECT_NEAR(view.token_max()[0][t], best[t], 1e-5) << t;
  // The key the queries look for gets the largest score.
  for (int t = 0; t < T; ++t) {
    if (t != 3) {
      EXPECT_GT(view.token_max()[0][3], view.token_max()[0][t]);
    }
  }
  EXPECT_EQ(base.n_tokens(), T);  // nothing was stored in the base
  EXPECT_GT(view.peak_scratch_bytes(), 0);
}

}  // namespace
}  // namespace qevict
