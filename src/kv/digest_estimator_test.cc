#include "kv/digest_estimator.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "util/error.h"

namespace qevict {
namespace {

std::vector<float> Normal(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(DigestEstimator, EveryKindGivesEstimateBytesBitForBit) {
  // Several digests of a layer against query rows of every KV head (GQA groups of 3, the rows
  // in the order the recall shortlist builds them, more rows a KV head than one block sums at
  // once, a KV head left without rows), for every kind: the prepared estimator's floats are
  // EstimateBytes's, exactly.
  for (const DigestGeometry g : {DigestGeometry{3, 64, 8}, DigestGeometry{1, 256, 8}}) {
    std::mt19937 rng(17);
    const int group = 3, n_obs = 4;  // 12 rows a KV head: two blocks of rows
    const int n_heads = g.n_kv_heads * group;
    const auto queries = Normal(rng, static_cast<size_t>(n_obs) * n_heads * g.head_dim, 1.f);
    std::vector<const float*> rows;
    std::vector<int> kv_heads;
    for (int s = 0; s < n_obs; ++s) {
      for (int h = 0; h < n_heads; ++h) {
        if (g.n_kv_heads > 1 && h / group == 1) continue;  // KV head 1 read by no row
        rows.push_back(queries.data() + (static_cast<size_t>(s) * n_heads + h) * g.head_dim);
        kv_heads.push_back(h / group);
      }
    }
    for (DigestKind kind : kAllDigestKinds) {
      SCOPED_TRACE(DigestKindName(kind));
      std::shared_ptr<const DigestContext> ctx;
      if (DigestNeedsContext(kind)) {
        const auto keys = Normal(
            rng, static_cast<size_t>(32) * g.n_kv_heads * g.window_tokens * g.head_dim, 1.f);
        const auto fit_q = Normal(rng, static_cast<size_t>(16) * g.n_kv_heads * g.head_dim, 1.f);
        ctx = std::make_shared<const DigestContext>(DigestContext::Fit(
            g, keys.data(), 32, DigestContextRank(kind, g), fit_q.data(), 16, g.n_kv_heads));
      }
      const DigestEstimator estimator(kind, g, ctx.get(), rows, kv_heads);
      const int64_t bytes = DigestBytes(kind, g);
      for (int w = 0; w < 5; ++w) {
        const auto keys = Normal(rng, static_cast<size_t>(g.n_kv_heads) * g.window_tokens * g.head_dim,
                                 0.5f + w);
        std::vector<uint8_t> digest(static_cast<size_t>(bytes));
        WindowDigest::BuildInto(kind, g, keys.data(), digest.data(), ctx.get());
        std::vector<float> out(rows.size(), -1.f);
        estimator.Estimate(digest.data(), out.data());
        for (size_t i = 0; i < rows.size(); ++i) {
          const float want =
              WindowDigest::EstimateBytes(kind, g, digest.data(), kv_heads[i], rows[i], ctx.get());
          EXPECT_EQ(out[i], want) << "row " << i << " window " << w;
        }
      }
    }
  }
}

TEST(DigestEstimator, AContextKindWithoutItsContextIsAnErrorWhenADigestIsRead) {
  // As with EstimateBytes: a layer without cold windows has no context yet, and preparing its
  // (empty) shortlist is no error; reading a digest without the context is.
  const DigestGeometry g{1, 64, 8};
  std::vector<float> q(64, 1.f);
  const float* rows[] = {q.data()};
  const int kv_heads[] = {0};
  const DigestEstimator estimator(DigestKind::kMeanKeyQ2C, g, nullptr, rows, kv_heads);
  std::vector<uint8_t> digest(static_cast<size_t>(DigestBytes(DigestKind::kMeanKeyQ2C, g)));
  float out = 0;
  EXPECT_THROW(estimator.Estimate(digest.data(), &out), Error);
}

}  // namespace
}  // namespace qevict
