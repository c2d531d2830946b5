// Window digests of the cold tier (issue 38; docs/kv-cache.md, "Cold tier (in progress): store and
// digests"): a few bytes per window, kept in RAM while the window's keys and values are on disk
// (disk_cold_store.h), from which a query's attention to the window is bounded or estimated without
// reading it. The recall step ranks cold windows by these estimates and reads the top ones back.
//
// All kinds are over a window's keys after RoPE, per KV head, and each digest is built from that
// one window's keys alone; the ...C kinds also read a DigestContext, fitted once per layer and
// shared by all its windows (below):
//   kQuestBound  (Quest): per channel the min and max of the window's keys, fp16 rounded
//                outward. bound(q) = sum_c max(q_c * min_c, q_c * max_c) >= q . k for every key
//                k of the window: a true upper bound of the window's max logit.
//   kSignSketch  a 1-bit sketch of every key: its signs and the mean |k_c| (fp16).
//                estimate(q) = max over keys of mean|k| * sum_c q_c * sign(k_c) (the key
//                quantized to one bit per channel with its least-squares scale).
//   kMeanKey     (InfLLM-like representative key): the mean key of the window (fp16).
//                estimate(q) = q . mean: the window's mean logit, not its max.
// The compact kinds (the cold tier charges digests to the resident budget, which is 5-10 % of
// the fp16 cache, so a digest must cost about 1 % of a window):
//   kMeanKeyQ8/Q4/Q3/Q2  the mean key quantized to B = 8/4/3/2 bits a channel: per KV head one
//                fp16 step s and codes u_c in [0, 2^B), value (u_c - 2^(B-1) + 1/2) * s (a
//                symmetric mid-rise grid). s is the step of that grid with the least squared
//                error over the head's channels (searched, so a few large channels are clipped
//                rather than every small one rounded to the first level).
//                estimate(q) = q . dequantized mean.
//   kMeanKeyQ4C/Q3C/Q2C  the same codes (and the same per-head step) over the mean key
//                normalized per channel by a DigestContext shared by the layer: z_c = (m_c -
//                offset_c) / scale_c, offset and scale the mean and the spread of the window
//                means of the keys it was fitted on. RoPE'd keys have a few channels far larger
//                than the rest (and of nearly constant sign), which on one per-head grid leave
//                the others one or two levels; normalized, every channel gets the whole grid.
//                estimate(q) = sum_c q_c (offset_c + scale_c * dequantized z_c).
//   kMeanKeyPcaQ8/Q4  (low rank, ShadowKV-like but weighted by the queries) the window's mean
//                key x = m - offset reduced to r coefficients z_i = a_i . x, chosen so that
//                q . x ~ sum_i (q . b_i) z_i loses the least for the queries the DigestContext
//                was fitted on: with Q = E[q q^T] and C the covariance of the window means, u_i
//                the top eigenvectors of Q^1/2 C Q^1/2, a_i = Q^1/2 u_i and b_i = Q^-1/2 u_i.
//                (Plain PCA of the keys, u_i of C alone, was measured first and ranked far worse:
//                the window means vary most along RoPE's slow channels, with position, which
//                queries barely read.) Each z_i is divided by its spread and put on the same
//                per-head grid: r = d / 4 at 8 bits or r = d / 2 at 4 bits (both d / 4 bytes).
//                estimate(q) = q . offset + sum_i (q . b_i) z_i (r dot products of q per window
//                and head: a cache would project q once per step).
//   kQuestBoundQ4  Quest's min and max on a 4-bit grid: per KV head one fp16 step s (>= the
//                head's largest |min_c|, |max_c| over 7), per channel a byte holding the signed
//                codes floor(min_c / s) and ceil(max_c / s) in [-8, 7]. Rounded outward, so the
//                bound stays >= q . k for every key of the window.
//
// Bytes per window (n KV heads, head_dim d, W tokens), against the window's fp16 block
// 2 * n * W * d * 2 bytes (keys and values):
//   kind            bytes                 share        SmolLM2-135M (n 3, d 64, W 8: 6144 B)
//   kQuestBound     2 * n * d * 2         1 / W        768 B = 12.5 %
//   kSignSketch     n * W * (d / 8 + 2)   (d/8+2)/4d   240 B = 3.91 %
//   kMeanKey        n * d * 2             1 / (2 W)    384 B = 6.25 %
//   kMeanKeyQ8      n * (d + 2)                        198 B = 3.22 %
//   kMeanKeyQ4      n * (d / 2 + 2)                    102 B = 1.66 %
//   kMeanKeyQ3      n * (3 d / 8 + 2)                   78 B = 1.27 %
//   kMeanKeyQ2      n * (d / 4 + 2)                     54 B = 0.88 %
//   kQuestBoundQ4   n * (d + 2)                        198 B = 3.22 %
//   kMeanKeyQ4C/Q3C/Q2C  as kMeanKeyQ4/Q3/Q2 (102, 78, 54 B), and once per layer the context's
//                   n * d * 2 * 2 bytes (768 B: 1.5 B a window over 509 windows)
//   kMeanKeyPcaQ8/Q4  n * (d / 4 + 2)                    54 B = 0.88 %, and once per layer the
//                   context's n * (d + 2 r d + r) * 2 bytes (12.8 KB for r 16, 25 KB for r 32)
//                                                      Gemma 3 270M (n 1, d 256, W 8: 8192 B)
//   kQuestBound                                        1024 B = 12.5 %
//   kSignSketch                                        272 B = 3.32 %
//   kMeanKey                                           512 B = 6.25 %
//   kMeanKeyQ8                                         258 B = 3.15 %
//   kMeanKeyQ4                                         130 B = 1.59 %
//   kMeanKeyQ3                                          98 B = 1.20 %
//   kMeanKeyQ2                                          66 B = 0.81 %
//   kQuestBoundQ4                                      258 B = 3.15 %
//   kMeanKeyQ4C/Q3C/Q2C  130, 98, 66 B; context 1024 B a layer
//   kMeanKeyPcaQ8/Q4                                    66 B = 0.81 %; context 66 KB (r 64) or
//                                                      132 KB (r 128) a layer
// None of these but the share of kQuestBound, kSignSketch and kMeanKey depends on W: a digest
// built over a longer span (the keys of G consecutive windows as one "window" of G * W tokens)
// costs 1 / G of these bytes per window, which is how bench/digest_recall.cc measures coarser
// granularities. (Checked by window_digest_test.cc, WindowDigest.BytesPerWindowAndShares.)
// Which kind ranks windows best on real queries is measured by bench/digest_recall.cc
// (docs/kv-cache.md, "Cold tier (in progress): store and digests").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/byte_stream.h"

namespace qevict {

enum class DigestKind : uint8_t {
  kQuestBound = 0,
  kSignSketch = 1,
  kMeanKey = 2,
  kMeanKeyQ8 = 3,
  kMeanKeyQ4 = 4,
  kMeanKeyQ3 = 5,
  kMeanKeyQ2 = 6,
  kQuestBoundQ4 = 7,
  kMeanKeyQ4C = 8,
  kMeanKeyQ3C = 9,
  kMeanKeyQ2C = 10,
  kMeanKeyPcaQ8 = 11,
  kMeanKeyPcaQ4 = 12,
};

inline constexpr DigestKind kAllDigestKinds[] = {
    DigestKind::kQuestBound,  DigestKind::kSignSketch,   DigestKind::kMeanKey,
    DigestKind::kMeanKeyQ8,   DigestKind::kMeanKeyQ4,    DigestKind::kMeanKeyQ3,
    DigestKind::kMeanKeyQ2,   DigestKind::kQuestBoundQ4, DigestKind::kMeanKeyQ4C,
    DigestKind::kMeanKeyQ3C,  DigestKind::kMeanKeyQ2C,   DigestKind::kMeanKeyPcaQ8,
    DigestKind::kMeanKeyPcaQ4};

// The kind's name: quest-minmax, sign-sketch, mean-key, mean-key-q8, mean-key-q4, mean-key-q3,
// mean-key-q2, quest-minmax-q4, mean-key-q4c, mean-key-q3c, mean-key-q2c, mean-key-pca-q8,
// mean-key-pca-q4. ParseDigestKind reads it
// back and throws qevict::Error naming the accepted names for anything else (a config value).
const char* DigestKindName(DigestKind kind);
DigestKind ParseDigestKind(std::string_view name);
// Whether the kind's estimate is a true upper bound of every q . k of the window (Quest's).
bool DigestIsUpperBound(DigestKind kind);
// Whether the kind's digests are built and read with a layer's DigestContext (the ...C and
// ...Pca kinds), and the rank of the context it reads: 0 for the per-channel one of the ...C
// kinds, r for the ...Pca kinds (fit it with DigestContext::Fit(g, keys, n, that rank)).
bool DigestNeedsContext(DigestKind kind);
struct DigestGeometry;
int DigestContextRank(DigestKind kind, const DigestGeometry& g);

struct DigestGeometry {
  int n_kv_heads = 0;
  int head_dim = 0;       // a multiple of 8 (the sign sketch packs 8 channels a byte)
  int window_tokens = 0;  // W: every window holds exactly W tokens
};

// Bytes one window's digest of `kind` holds (the figures above).
int64_t DigestBytes(DigestKind kind, const DigestGeometry& g);
// The bytes of the window's fp16 keys and values: 2 * n_kv_heads * W * head_dim * 2.
int64_t WindowFp16Bytes(const DigestGeometry& g);

// The per-layer part of the context kinds: per KV head, the offset and either the per-channel
// scales (rank 0) or the `rank` query-weighted directions a_i, b_i and their spreads (rank r)
// that normalize a window's mean key. Fitted once from a span of the layer's keys (the prompt's, at
// the layer's first eviction) and kept for the layer's life, so that every digest of the layer
// reads against the same one; it costs bytes() once per layer, not per window. Any kind of the
// same n_kv_heads and head_dim can use it (W may differ: a digest over several windows).
class DigestContext {
 public:
  DigestContext() = default;
  // From n_windows >= 1 consecutive window blocks of keys after RoPE, each [n_kv_heads][W][d]
  // (the layout BuildInto reads): offset_c is the mean of the windows' mean keys, scale_c their
  // standard deviation (at least 1e-3 of the head's largest, so a constant channel divides by
  // something). With rank r > 0, instead of the scales: the directions a_i, b_i of the header
  // comment (eigenvectors by Jacobi, in double; Q gets 1e-4 of its mean eigenvalue added, so
  // that Q^-1/2 stays finite) and the spreads of z_i (at least 1e-3 of the largest); this needs
  // the queries that read the layer, n_queries rows [n_heads][d] after RoPE (GQA: query head h
  // reads KV head h / (n_heads / n_kv_heads)), and throws qevict::Error without them. All are
  // held as fp16 values, so that a written context reads back equal.
  static DigestContext Fit(const DigestGeometry& g, const float* keys, int n_windows, int rank = 0,
                           const float* queries = nullptr, int n_queries = 0, int n_heads = 0);

  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  const float* offset(int kv_head) const { return offset_.data() + kv_head * head_dim_; }
  const float* scale(int kv_head) const { return scale_.data() + kv_head * head_dim_; }
  int rank() const { return rank_; }
  // Rank r: a_i of kv_head at basis(kv_head) + i * head_dim, b_i at reconstruction(kv_head) +
  // i * head_dim, the spread of z_i at component_scale(kv_head)[i].
  const float* basis(int kv_head) const {
    return basis_.data() + static_cast<int64_t>(kv_head) * rank_ * head_dim_;
  }
  const float* reconstruction(int kv_head) const {
    return reconstruction_.data() + static_cast<int64_t>(kv_head) * rank_ * head_dim_;
  }
  const float* component_scale(int kv_head) const {
    return component_scale_.data() + kv_head * rank_;
  }
  // The bytes it costs (fp16 values): rank 0, n * d * 2 * 2; rank r, n * (d + 2 r d + r) * 2.
  int64_t bytes() const {
    return int64_t{2} * (static_cast<int64_t>(offset_.size()) + scale_.size() + basis_.size() +
                         reconstruction_.size() + component_scale_.size());
  }

  void Write(ByteWriter& out) const;
  static DigestContext Read(ByteReader& in, const DigestGeometry& g);

 private:
  int n_kv_heads_ = 0, head_dim_ = 0, rank_ = 0;
  std::vector<float> offset_;           // [n_kv_heads][head_dim]
  std::vector<float> scale_;            // rank 0: [n_kv_heads][head_dim]; else empty
  std::vector<float> basis_;            // a_i: [n_kv_heads][rank][head_dim]
  std::vector<float> reconstruction_;   // b_i: [n_kv_heads][rank][head_dim]
  std::vector<float> component_scale_;  // [n_kv_heads][rank]
};

class WindowDigest {
 public:
  WindowDigest() = default;
  // The digest of one window's keys after RoPE, [n_kv_heads][W][head_dim] (the layout of a
  // window's key half in its fp16 block), fp32 or fp16.
  // The context kinds need the layer's context (kept alive by the digest; a context kind
  // without one, or one of another geometry, throws qevict::Error); the others ignore it.
  static WindowDigest Build(DigestKind kind, const DigestGeometry& g, const float* keys,
                            std::shared_ptr<const DigestContext> ctx = nullptr);
  static WindowDigest BuildFromFp16(DigestKind kind, const DigestGeometry& g, const uint16_t* keys,
                                    std::shared_ptr<const DigestContext> ctx = nullptr);

  DigestKind kind() const { return kind_; }
  // The bound (kQuestBound) or estimate of max over the window's keys k of kv_head of q . k,
  // for one query head's query q (head_dim floats, after RoPE; GQA: query head h reads KV head
  // h / (n_heads / n_kv_heads)).
  float Estimate(int kv_head, const float* q) const;
  // For every query head of a GQA group at once: out[h] for q + h * head_dim, h < n_heads.
  void EstimateHeads(int n_heads, const float* q, float* out) const;

  std::span<const uint8_t> bytes() const { return bytes_; }

  // The same over raw bytes, for a cache that keeps every window's digest of a layer in one
  // array (DigestBytes(kind, g) bytes each) rather than one object per window: BuildInto writes
  // the digest that Build would hold, EstimateBytes reads it as Estimate does (the context kinds
  // with the layer's context, as above).
  static void BuildInto(DigestKind kind, const DigestGeometry& g, const float* keys, uint8_t* out,
                        const DigestContext* ctx = nullptr);
  static void BuildIntoFromFp16(DigestKind kind, const DigestGeometry& g, const uint16_t* keys,
                                uint8_t* out, const DigestContext* ctx = nullptr);
  static float EstimateBytes(DigestKind kind, const DigestGeometry& g, const uint8_t* bytes,
                             int kv_head, const float* q, const DigestContext* ctx = nullptr);
  // One digest over G = windows.size() consecutive windows, each given as its own key block
  // [n_kv_heads][W][head_dim] of geometry g (as the cold store holds them): the digest Build
  // makes of their keys as one window of G * W tokens, DigestBytes(kind, g) bytes (a coarser
  // granularity: 1 / G of them per window). Read it with EstimateBytes and the geometry
  // {n_kv_heads, head_dim, G * W}.
  static void BuildIntoFromWindows(DigestKind kind, const DigestGeometry& g,
                                   std::span<const float* const> windows, uint8_t* out,
                                   const DigestContext* ctx = nullptr);
  static void BuildIntoFromFp16Windows(DigestKind kind, const DigestGeometry& g,
                                       std::span<const uint16_t* const> windows, uint8_t* out,
                                       const DigestContext* ctx = nullptr);
  // Written / read as the kind, the geometry and the bytes (not the context: a layer's is
  // written once, DigestContext::Write); Read checks the sizes (a digest of another geometry or
  // a cut record throws qevict::Error through the reader) and, for a context kind, takes the
  // layer's context.
  void Write(ByteWriter& out) const;
  static WindowDigest Read(ByteReader& in, const DigestGeometry& g,
                           std::shared_ptr<const DigestContext> ctx = nullptr);

 private:
  static WindowDigest Empty(DigestKind kind, const DigestGeometry& g);  // sized, all zero
  DigestKind kind_ = DigestKind::kQuestBound;
  DigestGeometry g_;
  std::vector<uint8_t> bytes_;
  std::shared_ptr<const DigestContext> ctx_;
};

}  // namespace qevict
