#include "kv/digest_estimator.h"

#include <cstring>

#include "kv/digest_codes.h"
#include "util/error.h"
#include "util/fp16.h"

namespace qevict {
namespace {

// The kinds whose estimate is q_off + s (sum_c q_code_c u_c - (half - 1/2) sum_c q_code_c), with
// q_off and q_code depending on the query alone.
bool QuantizedMeanKey(DigestKind kind, bool* context) {
  switch (kind) {
    case DigestKind::kMeanKeyQ8:
    case DigestKind::kMeanKeyQ4:
    case DigestKind::kMeanKeyQ3:
    case DigestKind::kMeanKeyQ2:
      *context = false;
      return true;
    case DigestKind::kMeanKeyQ4C:
    case DigestKind::kMeanKeyQ3C:
    case DigestKind::kMeanKeyQ2C:
      *context = true;
      return true;
    default:
      return false;
  }
}

// The d codes of `bits` bits at `packed` (digest_detail::GetCode's packing), as floats.
void DecodeCodes(const uint8_t* packed, int d, int bits, float* out) {
  switch (bits) {
    case 2:
      for (int i = 0; i < d / 4; ++i) {
        const unsigned b = packed[i];
        out[4 * i] = static_cast<float>(b & 3u);
        out[4 * i + 1] = static_cast<float>((b >> 2) & 3u);
        out[4 * i + 2] = static_cast<float>((b >> 4) & 3u);
        out[4 * i + 3] = static_cast<float>(b >> 6);
      }
      return;
    case 4:
      for (int i = 0; i < d / 2; ++i) {
        out[2 * i] = static_cast<float>(packed[i] & 15u);
        out[2 * i + 1] = static_cast<float>(packed[i] >> 4);
      }
      return;
    case 8:
      for (int i = 0; i < d; ++i) out[i] = static_cast<float>(packed[i]);
      return;
    default:
      for (int i = 0; i < d; ++i) out[i] = static_cast<float>(digest_detail::GetCode(packed, i, bits));
  }
}

}  // namespace

DigestEstimator::DigestEstimator(DigestKind kind, const DigestGeometry& g,
                                 const DigestContext* ctx, std::span<const float* const> rows,
                                 std::span<const int> kv_heads)
    : kind_(kind), g_(g), ctx_(ctx), rows_(rows.begin(), rows.end()),
      kv_heads_(kv_heads.begin(), kv_heads.end()) {
  QEVICT_CHECK(rows.size() == kv_heads.size());
  for (int h : kv_heads_) QEVICT_CHECK(h >= 0 && h < g.n_kv_heads);
  if (!QuantizedMeanKey(kind, &context_)) return;
  // A context kind without its layer's context (or with one of another geometry) takes the
  // EstimateBytes path, which says so at the first digest it reads, as before.
  if (context_ && (ctx == nullptr || ctx->n_kv_heads() != g.n_kv_heads ||
                   ctx->head_dim() != g.head_dim || ctx->rank() != DigestContextRank(kind, g))) {
    return;
  }
  bits_ = digest_detail::MeanKeyBits(kind);
  const int d = g.head_dim;
  const size_t n = rows_.size();
  q_offset_.assign(n, 0.0f);
  q_sum_.assign(n, 0.0f);
  for (int h = 0; h < g.n_kv_heads; ++h) {
    HeadRows head;
    head.kv_head = h;
    for (size_t i = 0; i < n; ++i) {
      if (kv_heads_[i] == h) head.rows.push_back(static_cast<int>(i));
    }
    if (head.rows.empty()) continue;
    const int k = static_cast<int>(head.rows.size());
    head.stride = (k + kRowBlock - 1) / kRowBlock * kRowBlock;
    head.q_code.assign(static_cast<size_t>(d) * head.stride, 0.0f);
    const float* offset = context_ ? ctx->offset(h) : nullptr;
    const float* scale = context_ ? ctx->scale(h) : nullptr;
    for (int j = 0; j < k; ++j) {
      const int i = head.rows[j];
      const float* q = rows_[i];
      // The same products and sums, in the same channel order, as EstimateBytes.
      float q_off = 0, q_sum = 0;
      for (int c = 0; c < d; ++c) {
        const float qc = context_ ? q[c] * scale[c] : q[c];
        if (context_) q_off += q[c] * offset[c];
        q_sum += qc;
        head.q_code[static_cast<size_t>(c) * head.stride + j] = qc;
      }
      q_offset_[i] = q_off;
      q_sum_[i] = q_sum;
    }
    heads_.push_back(std::move(head));
  }
  codes_.resize(d);
}

void DigestEstimator::Estimate(const uint8_t* digest, float* out) const {
  if (bits_ == 0) {
    for (size_t i = 0; i < rows_.size(); ++i) {
      out[i] = WindowDigest::EstimateBytes(kind_, g_, digest, kv_heads_[i], rows_[i], ctx_);
    }
    return;
  }
  const int d = g_.head_dim;
  const int64_t head_bytes = d * bits_ / 8 + 2;
  const float mid = static_cast<float>(1 << (bits_ - 1)) - 0.5f;
  for (const HeadRows& head : heads_) {
    const uint8_t* r = digest + head.kv_head * head_bytes;
    DecodeCodes(r + 2, d, bits_, codes_.data());
    uint16_t step;
    std::memcpy(&step, r, 2);
    const float s = Fp16ToFp32(step);
    const int k = static_cast<int>(head.rows.size());
    for (int j0 = 0; j0 < k; j0 += kRowBlock) {
      // Channel by channel, kRowBlock rows side by side in registers: each row's sum in
      // channel order, as EstimateBytes takes it.
      float sums[kRowBlock] = {};
      const float* q_code = head.q_code.data() + j0;
      for (int c = 0; c < d; ++c) {
        const float u = codes_[c];
        const float* qc = q_code + static_cast<size_t>(c) * head.stride;
        for (int j = 0; j < kRowBlock; ++j) sums[j] += qc[j] * u;
      }
      for (int j = 0; j < kRowBlock && j0 + j < k; ++j) {
        const int i = head.rows[j0 + j];
        const float scaled = s * (sums[j] - mid * q_sum_[i]);
        out[i] = context_ ? q_offset_[i] + scaled : scaled;
      }
    }
  }
}

}  // namespace qevict
