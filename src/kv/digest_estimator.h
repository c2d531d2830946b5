// Many digests of one layer estimated against the same query rows: RecallSource's shortlist at a
// routing step reads every cold window's digest with the step's queries (at each decoding step
// the last token's query heads; at a prompt's end with `--kv-recall-rank digest` the observed
// queries). What depends on the queries alone -- for the quantized mean-key kinds q * scale,
// q . offset and the sum of q * scale (kv/window_digest.cc, EstimateBytes) -- is computed once
// here instead of once a digest, and the rows of a KV head read a digest's codes once together.
// Estimate gives every row exactly the float EstimateBytes gives (each row's sums are taken in
// the same order); the kinds without a faster path call EstimateBytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/window_digest.h"

namespace qevict {

class DigestEstimator {
 public:
  // Rows summed side by side (one vector register of floats on AVX2).
  static constexpr int kRowBlock = 8;

  // rows[i]: a query head's query (head_dim floats, after RoPE), read against KV head
  // kv_heads[i]. The query rows must outlive the estimator (the kinds without a faster path read
  // them at each Estimate); so must ctx.
  DigestEstimator(DigestKind kind, const DigestGeometry& g, const DigestContext* ctx,
                  std::span<const float* const> rows, std::span<const int> kv_heads);

  // out[i] = WindowDigest::EstimateBytes(kind, g, digest, kv_heads[i], rows[i], ctx) for every
  // row i, bit for bit.
  void Estimate(const uint8_t* digest, float* out) const;

 private:
  struct HeadRows {
    int kv_head = 0;
    std::vector<int> rows;      // the rows that read this KV head
    // [channel][row of the head, padded to kRowBlock]: q_c (x scale_c with a context); 0 in
    // the padding.
    std::vector<float> q_code;
    int stride = 0;
  };
  DigestKind kind_;
  DigestGeometry g_;
  const DigestContext* ctx_;
  std::vector<const float*> rows_;
  std::vector<int> kv_heads_;
  int bits_ = 0;         // 0: no faster path
  bool context_ = false;
  std::vector<HeadRows> heads_;
  std::vector<float> q_offset_;  // [row] q . offset (context kinds)
  std::vector<float> q_sum_;     // [row] the sum of q_code over the channels
  mutable std::vector<float> codes_;  // one head's codes as floats
};

}  // namespace qevict
