#include "kv/window_digest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "util/error.h"
#include "util/fp16.h"

namespace qevict {
namespace {

constexpr auto& kKinds = kAllDigestKinds;

// The true max logit over the window's keys of kv_head, keys [n_kv][W][d], in double.
double TrueMax(const DigestGeometry& g, const std::vector<float>& keys, int kv_head,
               const float* q) {
  double best = -1e300;
  for (int t = 0; t < g.window_tokens; ++t) {
    const float* k =
        keys.data() + (static_cast<int64_t>(kv_head) * g.window_tokens + t) * g.head_dim;
    double s = 0;
    for (int c = 0; c < g.head_dim; ++c) s += static_cast<double>(q[c]) * k[c];
    best = std::max(best, s);
  }
  return best;
}

std::vector<float> Normal(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The context a kind reads (its rank), fitted on 32 windows of normal keys of geometry g.
std::shared_ptr<const DigestContext> ContextFor(DigestKind kind, const DigestGeometry& g,
                                                std::mt19937& rng) {
  const auto keys =
      Normal(rng, static_cast<size_t>(32) * g.n_kv_heads * g.window_tokens * g.head_dim, 1.f);
  const auto queries = Normal(rng, static_cast<size_t>(16) * g.n_kv_heads * g.head_dim, 1.f);
  return std::make_shared<const DigestContext>(DigestContext::Fit(
      g, keys.data(), 32, DigestContextRank(kind, g), queries.data(), 16, g.n_kv_heads));
}

TEST(WindowDigest, BytesPerWindowAndShares) {
  // The figures stated in window_digest.h.
  const DigestGeometry smol{3, 64, 8}, gemma{1, 256, 8};
  EXPECT_EQ(WindowFp16Bytes(smol), 6144);
  EXPECT_EQ(WindowFp16Bytes(gemma), 8192);
  EXPECT_EQ(DigestBytes(DigestKind::kQuestBound, smol), 768);
  EXPECT_EQ(DigestBytes(DigestKind::kSignSketch, smol), 240);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKey, smol), 384);
  EXPECT_EQ(DigestBytes(DigestKind::kQuestBound, gemma), 1024);
  EXPECT_EQ(DigestBytes(DigestKind::kSignSketch, gemma), 272);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKey, gemma), 512);
  // The compact kinds: about 1 % of a window and less (the cold tier's budget).
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ8, smol), 198);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ4, smol), 102);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ3, smol), 78);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ2, smol), 54);
  EXPECT_EQ(DigestBytes(DigestKind::kQuestBoundQ4, smol), 198);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ8, gemma), 258);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ4, gemma), 130);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ3, gemma), 98);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ2, gemma), 66);
  EXPECT_EQ(DigestBytes(DigestKind::kQuestBoundQ4, gemma), 258);
  auto share = [](DigestKind k, const DigestGeometry& g) {
    return 100.0 * DigestBytes(k, g) / WindowFp16Bytes(g);
  };
  EXPECT_DOUBLE_EQ(share(DigestKind::kQuestBound, smol), 12.5);
  EXPECT_NEAR(share(DigestKind::kSignSketch, smol), 3.91, 0.005);
  EXPECT_DOUBLE_EQ(share(DigestKind::kMeanKey, smol), 6.25);
  EXPECT_DOUBLE_EQ(share(DigestKind::kQuestBound, gemma), 12.5);
  EXPECT_NEAR(share(DigestKind::kSignSketch, gemma), 3.32, 0.005);
  EXPECT_DOUBLE_EQ(share(DigestKind::kMeanKey, gemma), 6.25);
  EXPECT_NEAR(share(DigestKind::kMeanKeyQ4, smol), 1.66, 0.005);
  EXPECT_NEAR(share(DigestKind::kMeanKeyQ3, smol), 1.27, 0.005);
  EXPECT_NEAR(share(DigestKind::kMeanKeyQ2, smol), 0.88, 0.005);
  EXPECT_NEAR(share(DigestKind::kMeanKeyQ4, gemma), 1.59, 0.005);
  EXPECT_NEAR(share(DigestKind::kMeanKeyQ3, gemma), 1.20, 0.005);
  EXPECT_NEAR(share(DigestKind::kMeanKeyQ2, gemma), 0.81, 0.005);
  // The context kinds hold what the per-head grid of their bits holds (and a context per layer).
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ4C, smol), 102);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ3C, smol), 78);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ2C, smol), 54);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ4C, gemma), 130);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ3C, gemma), 98);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ2C, gemma), 66);
  // The low-rank kinds: d / 4 bytes of coefficients either way (r = d/4 at 8 bits, d/2 at 4).
  EXPECT_EQ(DigestContextRank(DigestKind::kMeanKeyPcaQ8, smol), 16);
  EXPECT_EQ(DigestContextRank(DigestKind::kMeanKeyPcaQ4, gemma), 128);
  EXPECT_EQ(DigestContextRank(DigestKind::kMeanKeyQ4C, gemma), 0);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyPcaQ8, smol), 54);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyPcaQ4, smol), 54);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyPcaQ8, gemma), 66);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyPcaQ4, gemma), 66);
  // Over G windows' keys at once (a coarser digest), the quantized kinds' bytes do not grow.
  EXPECT_EQ(DigestBytes(DigestKind::kQuestBoundQ4, DigestGeometry{3, 64, 32}), 198);
  EXPECT_EQ(DigestBytes(DigestKind::kMeanKeyQ4, DigestGeometry{1, 256, 16}), 130);
  // A built digest holds exactly that many bytes.
  std::mt19937 rng(1);
  const auto keys = Normal(rng, 3 * 8 * 64, 1.f);
  for (DigestKind kind : kKinds) {
    const auto ctx = ContextFor(kind, smol, rng);
    EXPECT_EQ(
        static_cast<int64_t>(WindowDigest::Build(kind, smol, keys.data(), ctx).bytes().size()),
        DigestBytes(kind, smol));
  }
}

TEST(WindowDigest, QuestBoundIsAnUpperBoundOfEveryKeysLogit) {
  // Both bound kinds: fp16 min and max, and the 4-bit codes.
  EXPECT_TRUE(DigestIsUpperBound(DigestKind::kQuestBound));
  EXPECT_TRUE(DigestIsUpperBound(DigestKind::kQuestBoundQ4));
  EXPECT_FALSE(DigestIsUpperBound(DigestKind::kMeanKeyQ4));
  for (DigestKind kind : {DigestKind::kQuestBound, DigestKind::kQuestBoundQ4}) {
    std::mt19937 rng(7);
    const DigestGeometry geometries[] = {{3, 64, 8}, {1, 256, 8}, {2, 16, 4}};
    int checked = 0;
    for (const DigestGeometry& g : geometries) {
      for (int trial = 0; trial < 300; ++trial) {
        // Keys of mixed scales (RoPE'd keys have a few large channels), in fp32 values that fp16
        // cannot hold exactly. Every other trial's windows repeat one key: min = max = that key,
        // no slack left, and only the outward rounding of min and max keeps the bound a bound.
        const float scale = trial % 3 == 0 ? 0.01f : (trial % 3 == 1 ? 1.f : 30.f);
        auto keys =
            Normal(rng, static_cast<size_t>(g.n_kv_heads) * g.window_tokens * g.head_dim, scale);
        if (trial % 2 == 0) {
          for (int h = 0; h < g.n_kv_heads; ++h) {
            float* head = keys.data() + static_cast<int64_t>(h) * g.window_tokens * g.head_dim;
            for (int t = 1; t < g.window_tokens; ++t) {
              std::copy(head, head + g.head_dim, head + static_cast<int64_t>(t) * g.head_dim);
            }
          }
        }
        std::vector<uint16_t> half(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) half[i] = Fp32ToFp16(keys[i]);
        std::vector<float> half_as_float(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) half_as_float[i] = Fp16ToFp32(half[i]);
        const auto from32 = WindowDigest::Build(kind, g, keys.data());
        const auto from16 = WindowDigest::BuildFromFp16(kind, g, half.data());
        for (int h = 0; h < g.n_kv_heads; ++h) {
          const auto q = Normal(rng, g.head_dim, trial % 2 == 0 ? 1.f : 0.125f);
          EXPECT_GE(static_cast<double>(from32.Estimate(h, q.data())),
                    TrueMax(g, keys, h, q.data()))
              << DigestKindName(kind);
          EXPECT_GE(static_cast<double>(from16.Estimate(h, q.data())),
                    TrueMax(g, half_as_float, h, q.data()))
              << DigestKindName(kind);
          ++checked;
        }
      }
    }
    EXPECT_EQ(checked, 300 * (3 + 1 + 2));
  }
}

TEST(WindowDigest, QuestBoundQ4OfKeysBeyondFp16IsInfinite) {
  // A step of max |k| / 7 above fp16's largest value: every channel's codes are the outermost
  // and the bound is +inf, which still bounds (never a NaN, never a finite value below q . k).
  const DigestGeometry g{1, 8, 2};
  std::vector<float> keys(16, 1.f);
  keys[3] = 1e6f;
  const auto dg = WindowDigest::Build(DigestKind::kQuestBoundQ4, g, keys.data());
  const std::vector<float> q = {0.5f, -1, 0, 2, 0, 0, 0, 1};
  EXPECT_EQ(dg.Estimate(0, q.data()), std::numeric_limits<float>::infinity());
  const std::vector<float> zero(8, 0.f);
  EXPECT_EQ(dg.Estimate(0, zero.data()), 0.f);
}

TEST(WindowDigest, TheWindowHoldingTheMaximumKeyRanksFirst) {
  // 64 windows of small random keys; one holds a key along the query. For every kind, that
  // window's estimate is the largest, for every query head of the group that reads its KV head.
  const DigestGeometry g{2, 64, 8};
  const int n_heads = 6, n_windows = 64;  // GQA: 3 query heads per KV head
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const auto q = Normal(rng, static_cast<size_t>(n_heads) * g.head_dim, 1.f);
    const int planted = static_cast<int>(rng() % n_windows);
    const int planted_token = static_cast<int>(rng() % g.window_tokens);
    const int query_head = static_cast<int>(rng() % n_heads);
    const int kv_head = query_head / (n_heads / g.n_kv_heads);
    const float* qh = q.data() + query_head * g.head_dim;
    double q_norm = 0;
    for (int c = 0; c < g.head_dim; ++c) q_norm += static_cast<double>(qh[c]) * qh[c];
    q_norm = std::sqrt(q_norm);
    for (DigestKind kind : kKinds) {
      // (The low-rank kinds' fit is an eigensolver's work: 5 trials of 20 keep this fast.)
      if (DigestContextRank(kind, g) > 0 && trial >= 5) continue;
      // The windows' keys one after another (the layout DigestContext::Fit reads); the context
      // kinds' context is fitted on all of them, as a cache fits it on the prompt's.
      const size_t block = static_cast<size_t>(g.n_kv_heads) * g.window_tokens * g.head_dim;
      auto keys = Normal(rng, block * n_windows, 0.1f);
      float* k =
          keys.data() + planted * block + (kv_head * g.window_tokens + planted_token) * g.head_dim;
      for (int c = 0; c < g.head_dim; ++c) k[c] = static_cast<float>(8.0 * qh[c] / q_norm);
      const auto ctx =
          DigestNeedsContext(kind)
              ? std::make_shared<const DigestContext>(DigestContext::Fit(
                    g, keys.data(), n_windows, DigestContextRank(kind, g), q.data(), 1, n_heads))
              : nullptr;
      std::vector<WindowDigest> digests;
      for (int w = 0; w < n_windows; ++w) {
        digests.push_back(WindowDigest::Build(kind, g, keys.data() + w * block, ctx));
      }
      std::vector<float> est(n_heads);
      int best = -1;
      float best_score = -INFINITY;
      for (int w = 0; w < n_windows; ++w) {
        digests[w].EstimateHeads(n_heads, q.data(), est.data());
        EXPECT_EQ(est[query_head], digests[w].Estimate(kv_head, qh));
        if (est[query_head] > best_score) {
          best_score = est[query_head];
          best = w;
        }
      }
      EXPECT_EQ(best, planted) << DigestKindName(kind) << " trial " << trial;
    }
  }
}

TEST(WindowDigest, EstimatesOfTheSketchAndMeanKeyAreWhatTheyState) {
  // One KV head, two tokens, 8 channels: the sketch's estimate is the max over keys of
  // mean|k| * sum_c q_c sign(k_c); the mean key's is q . mean.
  const DigestGeometry g{1, 8, 2};
  const std::vector<float> keys = {1,  -2, 3,  -4, 0.5f, -0.5f, 2,  1,    // mean |k| 1.75
                                   -1, -1, -1, -1, -1,   -1,    -1, -1};  // mean |k| 1
  const std::vector<float> q = {1, 1, 1, 1, 1, 1, 1, 1};
  const auto sketch = WindowDigest::Build(DigestKind::kSignSketch, g, keys.data());
  // Token 0: signs + - + - + - + + -> sum q_c sign = 2, times 1.75 = 3.5; token 1: -8.
  EXPECT_FLOAT_EQ(sketch.Estimate(0, q.data()), 3.5f);
  const auto mean = WindowDigest::Build(DigestKind::kMeanKey, g, keys.data());
  // Means: 0, -1.5, 1, -2.5, -0.25, -0.75, 0.5, 0 -> sum -3.5.
  EXPECT_FLOAT_EQ(mean.Estimate(0, q.data()), -3.5f);
  const auto quest = WindowDigest::Build(DigestKind::kQuestBound, g, keys.data());
  // Per channel max: 1, -1, 3, -1, 0.5, -0.5, 2, 1 -> 5.
  EXPECT_FLOAT_EQ(quest.Estimate(0, q.data()), 5.f);
}

TEST(WindowDigest, QuantizedMeanKeysEstimateTheMeanLogitWithinTheirGrid) {
  // The quantized mean keys against the fp16 one, on keys with a few large channels as RoPE'd
  // keys have: the error of q . mean shrinks with the bits, 8 bits is close to exact, and the
  // context kinds (channels normalized by a context fitted on the first 50 windows) are closer
  // than the per-head grid of the same bits.
  const DigestGeometry g{1, 64, 8};
  std::mt19937 rng(5);
  const DigestKind kinds[] = {DigestKind::kMeanKeyQ2, DigestKind::kMeanKeyQ3,
                              DigestKind::kMeanKeyQ4, DigestKind::kMeanKeyQ8};
  const DigestKind context_kinds[] = {DigestKind::kMeanKeyQ2C, DigestKind::kMeanKeyQ3C,
                                      DigestKind::kMeanKeyQ4C};
  const int n_windows = 200, block = 8 * 64;
  auto keys = Normal(rng, static_cast<size_t>(n_windows) * block, 1.f);
  for (int t = 0; t < n_windows * 8; ++t) {
    keys[t * 64 + 5] += 6.f;  // a large channel with a consistent sign
    keys[t * 64 + 40] -= 3.f;
  }
  const auto ctx = std::make_shared<const DigestContext>(DigestContext::Fit(g, keys.data(), 50));
  EXPECT_EQ(ctx->bytes(), 64 * 2 * 2);
  double err[4] = {}, context_err[3] = {}, norm = 0;
  for (int w = 0; w < n_windows; ++w) {
    const float* wk = keys.data() + w * block;
    const auto q = Normal(rng, 64, 1.f);
    const double exact = WindowDigest::Build(DigestKind::kMeanKey, g, wk).Estimate(0, q.data());
    norm += exact * exact;
    for (int i = 0; i < 4; ++i) {
      const double e = WindowDigest::Build(kinds[i], g, wk).Estimate(0, q.data());
      err[i] += (e - exact) * (e - exact);
    }
    for (int i = 0; i < 3; ++i) {
      const double e = WindowDigest::Build(context_kinds[i], g, wk, ctx).Estimate(0, q.data());
      context_err[i] += (e - exact) * (e - exact);
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_LT(err[i + 1], err[i]) << DigestKindName(kinds[i + 1]);
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(context_err[i], err[i]) << DigestKindName(context_kinds[i]);
    if (i > 0) EXPECT_LT(context_err[i], context_err[i - 1]) << DigestKindName(context_kinds[i]);
  }
  EXPECT_LT(std::sqrt(context_err[2] / norm), 0.15);
  EXPECT_LT(std::sqrt(err[3] / norm), 0.03);  // 8 bits: within 3 % (rms; 1.6 % measured)
  // 4 bits: a 6-sigma channel on one per-head grid leaves the small channels few levels (0.25
  // measured); 2 bits is still closer than knowing nothing (an estimate of 0).
  EXPECT_LT(std::sqrt(err[2] / norm), 0.3);
  EXPECT_LT(std::sqrt(err[0] / norm), 0.9);
  // A window of zero keys: a zero step, every estimate 0.
  const std::vector<float> zeros(8 * 64, 0.f);
  const auto q = Normal(rng, 64, 1.f);
  for (DigestKind kind : kinds) {
    EXPECT_EQ(WindowDigest::Build(kind, g, zeros.data()).Estimate(0, q.data()), 0.f);
  }
}

TEST(WindowDigest, ContextKindsNeedTheirLayersContext) {
  const DigestGeometry g{3, 64, 8};
  std::mt19937 rng(13);
  const auto keys = Normal(rng, 4 * 3 * 8 * 64, 1.f);
  const auto q = Normal(rng, 64, 1.f);
  const auto ctx = std::make_shared<const DigestContext>(DigestContext::Fit(g, keys.data(), 4));
  EXPECT_EQ(ctx->bytes(), 768);  // n d 2 2, once per layer
  EXPECT_EQ(DigestContext::Fit(DigestGeometry{1, 256, 8}, keys.data(), 2).bytes(), 1024);
  for (DigestKind kind :
       {DigestKind::kMeanKeyQ4C, DigestKind::kMeanKeyQ3C, DigestKind::kMeanKeyQ2C}) {
    EXPECT_TRUE(DigestNeedsContext(kind));
    EXPECT_THROW(WindowDigest::Build(kind, g, keys.data()), Error);
    std::vector<uint8_t> raw(static_cast<size_t>(DigestBytes(kind, g)));
    EXPECT_THROW(WindowDigest::BuildInto(kind, g, keys.data(), raw.data()), Error);
    WindowDigest::BuildInto(kind, g, keys.data(), raw.data(), ctx.get());
    EXPECT_THROW(WindowDigest::EstimateBytes(kind, g, raw.data(), 0, q.data()), Error);
    // A context of another geometry is refused too.
    const DigestContext other = DigestContext::Fit(DigestGeometry{1, 64, 8}, keys.data(), 4);
    EXPECT_THROW(WindowDigest::BuildInto(kind, g, keys.data(), raw.data(), &other), Error);
    // Over G windows' keys (a coarser digest), the same context serves.
    const auto coarse = WindowDigest::Build(kind, DigestGeometry{3, 64, 32}, keys.data(), ctx);
    EXPECT_EQ(static_cast<int64_t>(coarse.bytes().size()), DigestBytes(kind, g));
  }
  EXPECT_FALSE(DigestNeedsContext(DigestKind::kMeanKeyQ4));
  // The low-rank kinds read a context of their rank only (and its bytes are n (d + r d + r) 2).
  const auto fit_queries = Normal(rng, 8 * 6 * 64, 1.f);  // 8 queries x 6 heads (GQA 2)
  const auto pca = std::make_shared<const DigestContext>(
      DigestContext::Fit(g, keys.data(), 4, 16, fit_queries.data(), 8, 6));
  EXPECT_EQ(pca->bytes(), 3 * (64 + 2 * 16 * 64 + 16) * 2);
  EXPECT_TRUE(DigestNeedsContext(DigestKind::kMeanKeyPcaQ8));
  EXPECT_THROW(WindowDigest::Build(DigestKind::kMeanKeyPcaQ8, g, keys.data(), ctx), Error);
  EXPECT_THROW(WindowDigest::Build(DigestKind::kMeanKeyPcaQ4, g, keys.data(), pca), Error);
  EXPECT_THROW(WindowDigest::Build(DigestKind::kMeanKeyQ4C, g, keys.data(), pca), Error);
  const auto built = WindowDigest::Build(DigestKind::kMeanKeyPcaQ8, g, keys.data(), pca);
  EXPECT_EQ(static_cast<int64_t>(built.bytes().size()), 54);
  {
    ByteWriter pca_out;
    pca->Write(pca_out);
    ByteReader pca_in(pca_out.bytes(), "context");
    const DigestContext pca_back = DigestContext::Read(pca_in, g);
    EXPECT_EQ(pca_back.rank(), 16);
    EXPECT_EQ(pca_back.bytes(), pca->bytes());
    for (int h = 0; h < 3; ++h) {
      EXPECT_TRUE(std::equal(pca->basis(h), pca->basis(h) + 16 * 64, pca_back.basis(h)));
      EXPECT_TRUE(std::equal(pca->reconstruction(h), pca->reconstruction(h) + 16 * 64,
                             pca_back.reconstruction(h)));
      EXPECT_TRUE(std::equal(pca->component_scale(h), pca->component_scale(h) + 16,
                             pca_back.component_scale(h)));
    }
  }
  // The context round-trips exactly (its values are fp16 values) and checks what it reads.
  ByteWriter out;
  ctx->Write(out);
  ByteReader in(out.bytes(), "context");
  const DigestContext back = DigestContext::Read(in, g);
  for (int h = 0; h < 3; ++h) {
    EXPECT_TRUE(std::equal(ctx->offset(h), ctx->offset(h) + 64, back.offset(h)));
    EXPECT_TRUE(std::equal(ctx->scale(h), ctx->scale(h) + 64, back.scale(h)));
  }
  ByteReader other_in(out.bytes(), "context");
  EXPECT_THROW(DigestContext::Read(other_in, DigestGeometry{3, 32, 8}), Error);
  std::vector<uint8_t> cut(out.bytes().begin(), out.bytes().end() - 2);
  ByteReader cut_in(cut, "context");
  EXPECT_THROW(DigestContext::Read(cut_in, g), Error);
  std::vector<uint8_t> zero_scale(out.bytes().begin(), out.bytes().end());
  zero_scale[zero_scale.size() - 1] = 0;  // the last scale's fp16 high byte: 0 or subnormal
  zero_scale[zero_scale.size() - 2] = 0;
  ByteReader zero_in(zero_scale, "context");
  EXPECT_THROW(DigestContext::Read(zero_in, g), Error);
}

// Queries that never read channels [0, 16) (RoPE'd queries leave some channels nearly unread).
std::vector<float> QueriesSkippingLowChannels(std::mt19937& rng, int n) {
  auto q = Normal(rng, static_cast<size_t>(n) * 64, 1.f);
  for (int i = 0; i < n; ++i) std::fill(q.begin() + i * 64, q.begin() + i * 64 + 16, 0.f);
  return q;
}

TEST(WindowDigest, LowRankKindsKeepWhatTheQueriesRead) {
  // Window means that vary in an 8-dimensional subspace of channels [16, 64) (plus a little
  // noise), and far more, per window, along channels [0, 16) that no query reads. Fitted on
  // the queries, the rank-16 context holds the subspace that matters: mean-key-pca-q8
  // estimates q . mean within a few percent, closer than mean-key-q2c at the same bytes, and
  // far closer than the same rank fitted as if every channel were read (plain PCA, which
  // spends its rank on channels [0, 16)).
  const DigestGeometry g{1, 64, 8};
  std::mt19937 rng(17);
  const int n_windows = 150, block = 8 * 64;
  auto mix = Normal(rng, 8 * 64, 1.f);  // 8 directions in channels [16, 64)
  for (int j = 0; j < 8; ++j) std::fill(mix.begin() + j * 64, mix.begin() + j * 64 + 16, 0.f);
  std::vector<float> keys(static_cast<size_t>(n_windows) * block);
  for (int w = 0; w < n_windows; ++w) {
    const auto latent = Normal(rng, 8, 1.f);
    const auto unread = Normal(rng, 16, 10.f);
    const auto noise = Normal(rng, block, 0.02f);
    for (int t = 0; t < 8; ++t) {
      for (int c = 0; c < 64; ++c) {
        float v = (c == 20 ? 5.f : 0.f) + (c < 16 ? unread[c] : 0.f) + noise[t * 64 + c];
        for (int j = 0; j < 8; ++j) v += latent[j] * mix[j * 64 + c];
        keys[static_cast<size_t>(w) * block + t * 64 + c] = v;
      }
    }
  }
  const int rank = DigestContextRank(DigestKind::kMeanKeyPcaQ8, g);
  const auto fit_queries = QueriesSkippingLowChannels(rng, 64);
  const auto pca = std::make_shared<const DigestContext>(
      DigestContext::Fit(g, keys.data(), 100, rank, fit_queries.data(), 64, 1));
  const auto every_channel = Normal(rng, 64 * 64, 1.f);
  const auto plain = std::make_shared<const DigestContext>(
      DigestContext::Fit(g, keys.data(), 100, rank, every_channel.data(), 64, 1));
  const auto per_channel =
      std::make_shared<const DigestContext>(DigestContext::Fit(g, keys.data(), 100));
  EXPECT_EQ(pca->bytes(), (64 + 2 * 16 * 64 + 16) * 2);
  double err_pca = 0, err_plain = 0, err_q2c = 0, norm = 0;
  auto sq = [](double x) { return x * x; };
  for (int w = 0; w < n_windows; ++w) {
    const float* wk = keys.data() + static_cast<size_t>(w) * block;
    const auto q = QueriesSkippingLowChannels(rng, 1);
    const double exact = WindowDigest::Build(DigestKind::kMeanKey, g, wk).Estimate(0, q.data());
    norm += exact * exact;
    err_pca += sq(WindowDigest::Build(DigestKind::kMeanKeyPcaQ8, g, wk, pca).Estimate(0, q.data()) -
                  exact);
    err_plain += sq(
        WindowDigest::Build(DigestKind::kMeanKeyPcaQ8, g, wk, plain).Estimate(0, q.data()) - exact);
    err_q2c +=
        sq(WindowDigest::Build(DigestKind::kMeanKeyQ2C, g, wk, per_channel).Estimate(0, q.data()) -
           exact);
  }
  EXPECT_LT(std::sqrt(err_pca / norm), 0.05);
  EXPECT_LT(err_pca, err_q2c);
  EXPECT_LT(4 * err_pca, err_plain);
  // A rank-r context is fitted on queries: none is an error, not a context of the wrong kind.
  EXPECT_THROW(DigestContext::Fit(g, keys.data(), 100, rank), Error);
}

TEST(WindowDigest, ADigestOverWindowsIsTheDigestOfTheirKeysAsOneWindow) {
  // Two window blocks [n][W][d] as the cold store holds them: the digest over both equals the
  // one Build makes of their keys gathered into one block [n][2W][d], for every kind, from fp32
  // and from fp16 keys.
  const DigestGeometry g{3, 64, 8}, pair{3, 64, 16};
  std::mt19937 rng(19);
  const auto a = Normal(rng, 3 * 8 * 64, 1.f), b = Normal(rng, 3 * 8 * 64, 1.f);
  std::vector<float> both(3 * 16 * 64);
  for (int h = 0; h < 3; ++h) {
    std::copy(a.begin() + h * 8 * 64, a.begin() + (h + 1) * 8 * 64, both.begin() + h * 16 * 64);
    std::copy(b.begin() + h * 8 * 64, b.begin() + (h + 1) * 8 * 64,
              both.begin() + h * 16 * 64 + 8 * 64);
  }
  std::vector<uint16_t> a16(a.size()), b16(b.size()), both16(both.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = Fp32ToFp16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) b16[i] = Fp32ToFp16(b[i]);
  for (size_t i = 0; i < both.size(); ++i) both16[i] = Fp32ToFp16(both[i]);
  const float* windows[] = {a.data(), b.data()};
  const uint16_t* windows16[] = {a16.data(), b16.data()};
  for (DigestKind kind : kKinds) {
    const auto ctx = ContextFor(kind, g, rng);
    const auto whole = WindowDigest::Build(kind, pair, both.data(), ctx);
    std::vector<uint8_t> raw(static_cast<size_t>(DigestBytes(kind, pair)), 0x5A);
    WindowDigest::BuildIntoFromWindows(kind, g, windows, raw.data(), ctx.get());
    EXPECT_TRUE(std::equal(raw.begin(), raw.end(), whole.bytes().begin(), whole.bytes().end()))
        << DigestKindName(kind);
    const auto whole16 = WindowDigest::BuildFromFp16(kind, pair, both16.data(), ctx);
    WindowDigest::BuildIntoFromFp16Windows(kind, g, windows16, raw.data(), ctx.get());
    EXPECT_TRUE(std::equal(raw.begin(), raw.end(), whole16.bytes().begin(), whole16.bytes().end()))
        << DigestKindName(kind);
  }
}

TEST(WindowDigest, KindsParseByName) {
  for (DigestKind kind : kKinds) EXPECT_EQ(ParseDigestKind(DigestKindName(kind)), kind);
  EXPECT_EQ(ParseDigestKind("mean-key-q4"), DigestKind::kMeanKeyQ4);
  try {
    ParseDigestKind("mean-key-q5");
    ADD_FAILURE() << "mean-key-q5 parsed";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("mean-key-q5"), std::string::npos) << what;
    EXPECT_NE(what.find("quest-minmax-q4"), std::string::npos) << what;  // the accepted names
  }
  EXPECT_THROW(ParseDigestKind(""), Error);
}

TEST(WindowDigest, DigestsRoundTripAndBadRecordsAreErrors) {
  const DigestGeometry g{3, 64, 8};
  std::mt19937 rng(3);
  const auto keys = Normal(rng, 3 * 8 * 64, 1.f);
  const auto q = Normal(rng, 64, 1.f);
  for (DigestKind kind : kKinds) {
    // The context kinds' layer context (the other kinds ignore it).
    const auto ctx = ContextFor(kind, g, rng);
    const auto d = WindowDigest::Build(kind, g, keys.data(), ctx);
    ByteWriter out;
    d.Write(out);
    EXPECT_EQ(out.bytes().size(), 1 + 3 * 4 + 8 + static_cast<size_t>(DigestBytes(kind, g)));
    ByteReader in(out.bytes(), "digest");
    const auto back = WindowDigest::Read(in, g, ctx);
    EXPECT_EQ(back.kind(), kind);
    EXPECT_TRUE(
        std::equal(back.bytes().begin(), back.bytes().end(), d.bytes().begin(), d.bytes().end()));
    for (int h = 0; h < 3; ++h) EXPECT_EQ(back.Estimate(h, q.data()), d.Estimate(h, q.data()));
    // The raw-bytes forms (a layer's digests in one array) write and read the same digest; the
    // array is dirty first, so a byte BuildInto failed to write would show.
    std::vector<uint8_t> raw(static_cast<size_t>(2 * DigestBytes(kind, g)), 0xA5);
    WindowDigest::BuildInto(kind, g, keys.data(), raw.data() + DigestBytes(kind, g), ctx.get());
    EXPECT_TRUE(std::equal(d.bytes().begin(), d.bytes().end(), raw.begin() + DigestBytes(kind, g)));
    for (int h = 0; h < 3; ++h) {
      EXPECT_EQ(WindowDigest::EstimateBytes(kind, g, raw.data() + DigestBytes(kind, g), h, q.data(),
                                            ctx.get()),
                d.Estimate(h, q.data()));
    }
    // Read for another geometry, or cut short: errors, never a digest of the wrong size.
    ByteReader other(out.bytes(), "digest");
    EXPECT_THROW(WindowDigest::Read(other, DigestGeometry{1, 64, 8}, ctx), Error);
    if (DigestNeedsContext(kind)) {  // read without the layer's context
      ByteReader no_ctx(out.bytes(), "digest");
      EXPECT_THROW(WindowDigest::Read(no_ctx, g), Error);
    }
    std::vector<uint8_t> cut(out.bytes().begin(), out.bytes().end() - 1);
    ByteReader short_in(cut, "digest");
    EXPECT_THROW(WindowDigest::Read(short_in, g), Error);
  }
  for (uint8_t k : {uint8_t{11}, uint8_t{12}, uint8_t{255}}) {
    std::vector<uint8_t> bad_kind = {k, 0, 0, 0, 0};
    ByteReader bad(bad_kind, "digest");
    EXPECT_THROW(WindowDigest::Read(bad, g), Error);
  }
}

}  // namespace
}  // namespace qevict
