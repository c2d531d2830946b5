#include "kv/window_digest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kv/digest_codes.h"
#include "util/error.h"
#include "util/fp16.h"

namespace qevict {

namespace digest_detail {

// Bits a channel of the quantized mean-key kinds; 0 for the other kinds.
int MeanKeyBits(DigestKind kind) {
  switch (kind) {
    case DigestKind::kMeanKeyQ8:
      return 8;
    case DigestKind::kMeanKeyQ4:
      return 4;
    case DigestKind::kMeanKeyQ3:
      return 3;
    case DigestKind::kMeanKeyQ2:
      return 2;
    case DigestKind::kMeanKeyQ4C:
      return 4;
    case DigestKind::kMeanKeyQ3C:
      return 3;
    case DigestKind::kMeanKeyQ2C:
      return 2;
    case DigestKind::kMeanKeyPcaQ8:
      return 8;
    case DigestKind::kMeanKeyPcaQ4:
      return 4;
    default:
      return 0;
  }
}

const DigestContext& NeedContext(DigestKind kind, const DigestGeometry& g,
                                 const DigestContext* ctx) {
  if (ctx == nullptr) {
    throw Error(std::string("window digest: ") + DigestKindName(kind) +
                " is built and read with its layer's DigestContext, and none was given");
  }
  if (ctx->n_kv_heads() != g.n_kv_heads || ctx->head_dim() != g.head_dim ||
      ctx->rank() != DigestContextRank(kind, g)) {
    throw Error("window digest: a context of " + std::to_string(ctx->n_kv_heads()) +
                " KV heads x " + std::to_string(ctx->head_dim()) + ", rank " +
                std::to_string(ctx->rank()) + " for a " + DigestKindName(kind) + " digest of " +
                std::to_string(g.n_kv_heads) + " x " + std::to_string(g.head_dim) + " (rank " +
                std::to_string(DigestContextRank(kind, g)) + ")");
  }
  return *ctx;
}

}  // namespace digest_detail

namespace {

using digest_detail::GetCode;
using digest_detail::MeanKeyBits;
using digest_detail::NeedContext;

inline float KeyValue(float k) { return k; }
inline float KeyValue(uint16_t k) { return Fp16ToFp32(k); }

// fp16 of v rounded toward -infinity (down) or +infinity (up), so that a min stored in fp16 is
// never above the true min and a max never below the true max: Quest's bound stays a bound.
uint16_t Fp16Directed(float v, bool up) {
  uint16_t h = Fp32ToFp16(v);
  const float back = Fp16ToFp32(h);
  if (std::isnan(back) || back == v || std::isinf(back)) return h;
  const bool negative = (h & 0x8000u) != 0;
  if (up && back < v) {
    if (h == 0x8000u) return 0x0001u;  // -0 -> the smallest positive subnormal
    return negative ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
  }
  if (!up && back > v) {
    if (h == 0x0000u) return 0x8001u;  // +0 -> the smallest negative subnormal
    return negative ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
  }
  return h;
}

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

void CheckGeometry(const DigestGeometry& g) {
  QEVICT_CHECK(g.n_kv_heads > 0 && g.head_dim > 0 && g.head_dim % 8 == 0 && g.window_tokens > 0);
}

// Codes of `bits` bits packed least significant bit first, code i at bit i * bits (3-bit codes
// straddle bytes).
void PutCode(uint8_t* packed, int i, int bits, unsigned code) {
  const int at = i * bits, byte = at / 8, shift = at % 8;
  packed[byte] |= static_cast<uint8_t>(code << shift);
  if (shift + bits > 8) packed[byte + 1] |= static_cast<uint8_t>(code >> (8 - shift));
}

// The mid-rise grid of `bits` bits with step s: code u stands for (u - half + 1/2) * s.
unsigned MidRiseCode(double x, double step, int bits) {
  const int half = 1 << (bits - 1);
  const double u = std::floor(x / step) + half;
  return static_cast<unsigned>(std::clamp(u, 0.0, static_cast<double>(2 * half - 1)));
}

// One head's mean key (d values) on the grid of `bits` bits: the fp16 step with the least squared
// error among 32 from the one that just covers the largest |m_c| down to 0.15 of it, then the
// codes.
void QuantizeMeanKey(const float* mean, int d, int bits, uint8_t* out) {
  float absmax = 0;
  for (int c = 0; c < d; ++c) absmax = std::max(absmax, std::fabs(mean[c]));
  const int half = 1 << (bits - 1);
  uint16_t best_step = 0;  // 0: every code stands for 0
  if (absmax > 0) {
    double best_err = std::numeric_limits<double>::infinity();
    const double cover = absmax / (half - 0.5);
    for (int i = 0; i < 32; ++i) {
      const double f = 1.0 - 0.85 * i / 31;
      const uint16_t h = Fp32ToFp16(static_cast<float>(std::min(cover * f, 65504.0)));
      const double step = Fp16ToFp32(h);
      if (!(step > 0)) continue;
      double err = 0;
      for (int c = 0; c < d; ++c) {
        const double v =
            (static_cast<double>(MidRiseCode(mean[c], step, bits)) - half + 0.5) * step;
        err += (v - mean[c]) * (v - mean[c]);
      }
      if (err < best_err) {
        best_err = err;
        best_step = h;
      }
    }
  }
  StoreU16(out, best_step);
  const double step = Fp16ToFp32(best_step);
  for (int c = 0; c < d; ++c) {
    PutCode(out + 2, c, bits, step > 0 ? MidRiseCode(mean[c], step, bits) : half);
  }
}

// Quest's min and max of one head on a 4-bit grid, rounded outward (see the header).
void QuantizeQuestBound(const float* lo, const float* hi, int d, uint8_t* out) {
  float a = 0;
  for (int c = 0; c < d; ++c) a = std::max({a, std::fabs(lo[c]), std::fabs(hi[c])});
  uint16_t h = 0;
  if (a > 0) {
    h = Fp16Directed(static_cast<float>(a / 7.0), /*up=*/true);
    while (std::isfinite(Fp16ToFp32(h)) && 7.0 * Fp16ToFp32(h) < a) ++h;  // next fp16 up
  }
  StoreU16(out, h);
  const double step = Fp16ToFp32(h);
  for (int c = 0; c < d; ++c) {
    int clo = 0, chi = 0;
    if (!std::isfinite(step)) {  // keys beyond 7 * 65504: the bound is +inf, still a bound
      clo = -8;
      chi = 7;
    } else if (step > 0) {
      clo = static_cast<int>(std::floor(lo[c] / step));
      while (clo * step > lo[c]) --clo;
      chi = static_cast<int>(std::ceil(hi[c] / step));
      while (chi * step < hi[c]) ++chi;
    }
    QEVICT_CHECK(clo >= -8 && clo <= 7 && chi >= -8 && chi <= 7);
    out[2 + c] = static_cast<uint8_t>((clo & 0xF) | ((chi & 0xF) << 4));
  }
}


int SignedNibble(unsigned n) { return static_cast<int>(n ^ 8u) - 8; }

// A double rounded up to the next float at or above it: a bound computed in double stays one.
float RoundUpToFloat(double s) {
  float f = static_cast<float>(s);
  if (static_cast<double>(f) < s) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

}  // namespace

const char* DigestKindName(DigestKind kind) {
  switch (kind) {
    case DigestKind::kQuestBound:
      return "quest-minmax";
    case DigestKind::kSignSketch:
      return "sign-sketch";
    case DigestKind::kMeanKey:
      return "mean-key";
    case DigestKind::kMeanKeyQ8:
      return "mean-key-q8";
    case DigestKind::kMeanKeyQ4:
      return "mean-key-q4";
    case DigestKind::kMeanKeyQ3:
      return "mean-key-q3";
    case DigestKind::kMeanKeyQ2:
      return "mean-key-q2";
    case DigestKind::kQuestBoundQ4:
      return "quest-minmax-q4";
    case DigestKind::kMeanKeyQ4C:
      return "mean-key-q4c";
    case DigestKind::kMeanKeyQ3C:
      return "mean-key-q3c";
    case DigestKind::kMeanKeyQ2C:
      return "mean-key-q2c";
    case DigestKind::kMeanKeyPcaQ8:
      return "mean-key-pca-q8";
    case DigestKind::kMeanKeyPcaQ4:
      return "mean-key-pca-q4";
  }
  return "?";
}

DigestKind ParseDigestKind(std::string_view name) {
  std::string accepted;
  for (DigestKind kind : kAllDigestKinds) {
    if (name == DigestKindName(kind)) return kind;
    accepted += accepted.empty() ? "" : ", ";
    accepted += DigestKindName(kind);
  }
  throw Error("unknown window digest '" + std::string(name) + "' (accepted: " + accepted + ")");
}

bool DigestIsUpperBound(DigestKind kind) {
  return kind == DigestKind::kQuestBound || kind == DigestKind::kQuestBoundQ4;
}

bool DigestNeedsContext(DigestKind kind) {
  return kind == DigestKind::kMeanKeyQ4C || kind == DigestKind::kMeanKeyQ3C ||
         kind == DigestKind::kMeanKeyQ2C || kind == DigestKind::kMeanKeyPcaQ8 ||
         kind == DigestKind::kMeanKeyPcaQ4;
}

int DigestContextRank(DigestKind kind, const DigestGeometry& g) {
  if (kind == DigestKind::kMeanKeyPcaQ8) return g.head_dim / 4;
  if (kind == DigestKind::kMeanKeyPcaQ4) return g.head_dim / 2;
  return 0;
}

int64_t DigestBytes(DigestKind kind, const DigestGeometry& g) {
  const int64_t n = g.n_kv_heads, d = g.head_dim, w = g.window_tokens;
  switch (kind) {
    case DigestKind::kQuestBound:
      return 2 * n * d * 2;  // min and max per channel, fp16
    case DigestKind::kSignSketch:
      return n * w * (d / 8 + 2);  // signs + fp16 scale per key
    case DigestKind::kMeanKey:
      return n * d * 2;  // mean per channel, fp16
    case DigestKind::kMeanKeyQ8:
    case DigestKind::kMeanKeyQ4:
    case DigestKind::kMeanKeyQ3:
    case DigestKind::kMeanKeyQ2:
    case DigestKind::kMeanKeyQ4C:
    case DigestKind::kMeanKeyQ3C:
    case DigestKind::kMeanKeyQ2C:
      return n * (d * MeanKeyBits(kind) / 8 + 2);
    case DigestKind::kMeanKeyPcaQ8:
    case DigestKind::kMeanKeyPcaQ4:  // r coefficients: d / 4 bytes either way
      return n * (DigestContextRank(kind, g) * MeanKeyBits(kind) / 8 +
                  2);  // packed codes + fp16 step per head
    case DigestKind::kQuestBoundQ4:
      return n * (d + 2);  // a byte of two 4-bit codes per channel + fp16 step per head
  }
  return 0;
}

int64_t WindowFp16Bytes(const DigestGeometry& g) {
  return int64_t{2} * g.n_kv_heads * g.window_tokens * g.head_dim * 2;
}

namespace {

template <class Key>
void BuildDigest(DigestKind kind, const DigestGeometry& g, const Key* keys, uint8_t* out,
                 const DigestContext* ctx) {
  CheckGeometry(g);
  if (DigestNeedsContext(kind)) NeedContext(kind, g, ctx);
  std::memset(out, 0, static_cast<size_t>(DigestBytes(kind, g)));
  const int d = g.head_dim, w = g.window_tokens;
  for (int h = 0; h < g.n_kv_heads; ++h) {
    const Key* head = keys + static_cast<int64_t>(h) * w * d;
    switch (kind) {
      case DigestKind::kQuestBound: {
        uint8_t* mins = out + static_cast<int64_t>(h) * 2 * d * 2;
        uint8_t* maxs = mins + d * 2;
        for (int c = 0; c < d; ++c) {
          float lo = std::numeric_limits<float>::infinity(), hi = -lo;
          for (int t = 0; t < w; ++t) {
            const float k = KeyValue(head[static_cast<int64_t>(t) * d + c]);
            lo = std::min(lo, k);
            hi = std::max(hi, k);
          }
          StoreU16(mins + c * 2, Fp16Directed(lo, /*up=*/false));
          StoreU16(maxs + c * 2, Fp16Directed(hi, /*up=*/true));
        }
        break;
      }
      case DigestKind::kSignSketch: {
        const int rec = d / 8 + 2;
        for (int t = 0; t < w; ++t) {
          uint8_t* r = out + (static_cast<int64_t>(h) * w + t) * rec;
          double abs_sum = 0;
          for (int c = 0; c < d; ++c) {
            const float k = KeyValue(head[static_cast<int64_t>(t) * d + c]);
            if (k >= 0) r[c / 8] |= static_cast<uint8_t>(1u << (c % 8));
            abs_sum += std::fabs(k);
          }
          StoreU16(r + d / 8, Fp32ToFp16(static_cast<float>(abs_sum / d)));
        }
        break;
      }
      case DigestKind::kMeanKey: {
        uint8_t* mean = out + static_cast<int64_t>(h) * d * 2;
        for (int c = 0; c < d; ++c) {
          double s = 0;
          for (int t = 0; t < w; ++t) s += KeyValue(head[static_cast<int64_t>(t) * d + c]);
          StoreU16(mean + c * 2, Fp32ToFp16(static_cast<float>(s / w)));
        }
        break;
      }
      case DigestKind::kMeanKeyQ8:
      case DigestKind::kMeanKeyQ4:
      case DigestKind::kMeanKeyQ3:
      case DigestKind::kMeanKeyQ2:
      case DigestKind::kMeanKeyQ4C:
      case DigestKind::kMeanKeyQ3C:
      case DigestKind::kMeanKeyQ2C: {
        const int bits = MeanKeyBits(kind);
        const bool normalize = DigestNeedsContext(kind);
        std::vector<float> mean(d);
        for (int c = 0; c < d; ++c) {
          double s = 0;
          for (int t = 0; t < w; ++t) s += KeyValue(head[static_cast<int64_t>(t) * d + c]);
          mean[c] = static_cast<float>(s / w);
          if (normalize) mean[c] = (mean[c] - ctx->offset(h)[c]) / ctx->scale(h)[c];
        }
        QuantizeMeanKey(mean.data(), d, bits, out + static_cast<int64_t>(h) * (d * bits / 8 + 2));
        break;
      }
      case DigestKind::kQuestBoundQ4: {
        std::vector<float> lo(d, std::numeric_limits<float>::infinity());
        std::vector<float> hi(d, -std::numeric_limits<float>::infinity());
        for (int t = 0; t < w; ++t) {
          for (int c = 0; c < d; ++c) {
            const float k = KeyValue(head[static_cast<int64_t>(t) * d + c]);
            lo[c] = std::min(lo[c], k);
            hi[c] = std::max(hi[c], k);
          }
        }
        QuantizeQuestBound(lo.data(), hi.data(), d, out + static_cast<int64_t>(h) * (d + 2));
        break;
      }
      case DigestKind::kMeanKeyPcaQ8:
      case DigestKind::kMeanKeyPcaQ4: {
        const int bits = MeanKeyBits(kind), rank = ctx->rank();
        std::vector<double> centered(d);
        for (int c = 0; c < d; ++c) {
          double s = 0;
          for (int t = 0; t < w; ++t) s += KeyValue(head[static_cast<int64_t>(t) * d + c]);
          centered[c] = s / w - ctx->offset(h)[c];
        }
        std::vector<float> z(rank);
        for (int i = 0; i < rank; ++i) {
          const float* u = ctx->basis(h) + static_cast<int64_t>(i) * d;
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += u[c] * centered[c];
          z[i] = static_cast<float>(dot / ctx->component_scale(h)[i]);
        }
        QuantizeMeanKey(z.data(), rank, bits,
                        out + static_cast<int64_t>(h) * (rank * bits / 8 + 2));
        break;
      }
    }
  }
}

}  // namespace

void WindowDigest::BuildInto(DigestKind kind, const DigestGeometry& g, const float* keys,
                             uint8_t* out, const DigestContext* ctx) {
  BuildDigest(kind, g, keys, out, ctx);
}

void WindowDigest::BuildIntoFromFp16(DigestKind kind, const DigestGeometry& g, const uint16_t* keys,
                                     uint8_t* out, const DigestContext* ctx) {
  BuildDigest(kind, g, keys, out, ctx);
}

namespace {

// The G window blocks [n][W][d] gathered into one block [n][G W][d], then digested as one window.
template <class Key>
void BuildFromWindows(DigestKind kind, const DigestGeometry& g, std::span<const Key* const> windows,
                      uint8_t* out, const DigestContext* ctx) {
  CheckGeometry(g);
  QEVICT_CHECK(!windows.empty());
  const int n = g.n_kv_heads, d = g.head_dim, w = g.window_tokens;
  const int group = static_cast<int>(windows.size());
  std::vector<Key> keys(static_cast<size_t>(n) * group * w * d);
  for (int i = 0; i < group; ++i) {
    for (int h = 0; h < n; ++h) {
      const Key* src = windows[i] + static_cast<int64_t>(h) * w * d;
      std::copy(src, src + static_cast<int64_t>(w) * d,
                keys.data() + (static_cast<int64_t>(h) * group + i) * w * d);
    }
  }
  BuildDigest(kind, DigestGeometry{n, d, group * w}, keys.data(), out, ctx);
}

}  // namespace

void WindowDigest::BuildIntoFromWindows(DigestKind kind, const DigestGeometry& g,
                                        std::span<const float* const> windows, uint8_t* out,
                                        const DigestContext* ctx) {
  BuildFromWindows(kind, g, windows, out, ctx);
}

void WindowDigest::BuildIntoFromFp16Windows(DigestKind kind, const DigestGeometry& g,
                                            std::span<const uint16_t* const> windows, uint8_t* out,
                                            const DigestContext* ctx) {
  BuildFromWindows(kind, g, windows, out, ctx);
}

WindowDigest WindowDigest::Build(DigestKind kind, const DigestGeometry& g, const float* keys,
                                 std::shared_ptr<const DigestContext> ctx) {
  WindowDigest dg = Empty(kind, g);
  BuildDigest(kind, g, keys, dg.bytes_.data(), ctx.get());
  if (DigestNeedsContext(kind)) dg.ctx_ = std::move(ctx);
  return dg;
}

WindowDigest WindowDigest::BuildFromFp16(DigestKind kind, const DigestGeometry& g,
                                         const uint16_t* keys,
                                         std::shared_ptr<const DigestContext> ctx) {
  WindowDigest dg = Empty(kind, g);
  BuildDigest(kind, g, keys, dg.bytes_.data(), ctx.get());
  if (DigestNeedsContext(kind)) dg.ctx_ = std::move(ctx);
  return dg;
}

WindowDigest WindowDigest::Empty(DigestKind kind, const DigestGeometry& g) {
  WindowDigest dg;
  dg.kind_ = kind;
  dg.g_ = g;
  dg.bytes_.resize(static_cast<size_t>(DigestBytes(kind, g)));
  return dg;
}

float WindowDigest::Estimate(int kv_head, const float* q) const {
  return EstimateBytes(kind_, g_, bytes_.data(), kv_head, q, ctx_.get());
}

float WindowDigest::EstimateBytes(DigestKind kind, const DigestGeometry& g, const uint8_t* b,
                                  int kv_head, const float* q, const DigestContext* ctx) {
  QEVICT_CHECK(kv_head >= 0 && kv_head < g.n_kv_heads);
  const int d = g.head_dim, w = g.window_tokens;
  switch (kind) {
    case DigestKind::kQuestBound: {
      const uint8_t* mins = b + static_cast<int64_t>(kv_head) * 2 * d * 2;
      const uint8_t* maxs = mins + d * 2;
      // In double (each product of a float and an fp16 value is exact there), then rounded up
      // to float: the result is never below the true max logit.
      double s = 0;
      for (int c = 0; c < d; ++c) {
        if (q[c] == 0) continue;  // also keeps 0 * inf out
        const double lo = static_cast<double>(q[c]) * Fp16ToFp32(LoadU16(mins + c * 2));
        const double hi = static_cast<double>(q[c]) * Fp16ToFp32(LoadU16(maxs + c * 2));
        s += std::max(lo, hi);
      }
      return RoundUpToFloat(s);
    }
    case DigestKind::kSignSketch: {
      const int rec = d / 8 + 2;
      float q_sum = 0;
      for (int c = 0; c < d; ++c) q_sum += q[c];
      float best = -std::numeric_limits<float>::infinity();
      for (int t = 0; t < w; ++t) {
        const uint8_t* r = b + (static_cast<int64_t>(kv_head) * w + t) * rec;
        float pos = 0;  // sum of q_c over the channels whose key sign is +
        for (int c = 0; c < d; ++c) {
          if (r[c / 8] & (1u << (c % 8))) pos += q[c];
        }
        best = std::max(best, Fp16ToFp32(LoadU16(r + d / 8)) * (2 * pos - q_sum));
      }
      return best;
    }
    case DigestKind::kMeanKey: {
      const uint8_t* mean = b + static_cast<int64_t>(kv_head) * d * 2;
      float s = 0;
      for (int c = 0; c < d; ++c) s += q[c] * Fp16ToFp32(LoadU16(mean + c * 2));
      return s;
    }
    case DigestKind::kMeanKeyQ8:
    case DigestKind::kMeanKeyQ4:
    case DigestKind::kMeanKeyQ3:
    case DigestKind::kMeanKeyQ2: {
      const int bits = MeanKeyBits(kind), half = 1 << (bits - 1);
      const uint8_t* r = b + static_cast<int64_t>(kv_head) * (d * bits / 8 + 2);
      // q . ((u - half + 1/2) s) = s (sum_c q_c u_c - (half - 1/2) sum_c q_c)
      float qu = 0, q_sum = 0;
      for (int c = 0; c < d; ++c) {
        qu += q[c] * static_cast<float>(GetCode(r + 2, c, bits));
        q_sum += q[c];
      }
      return Fp16ToFp32(LoadU16(r)) * (qu - (static_cast<float>(half) - 0.5f) * q_sum);
    }
    case DigestKind::kMeanKeyQ4C:
    case DigestKind::kMeanKeyQ3C:
    case DigestKind::kMeanKeyQ2C: {
      const DigestContext& cx = NeedContext(kind, g, ctx);
      const int bits = MeanKeyBits(kind), half = 1 << (bits - 1);
      const uint8_t* r = b + static_cast<int64_t>(kv_head) * (d * bits / 8 + 2);
      const float* offset = cx.offset(kv_head);
      const float* scale = cx.scale(kv_head);
      // q . (offset + scale (u - half + 1/2) s)
      //   = q . offset + s (sum_c q_c scale_c u_c - (half - 1/2) sum_c q_c scale_c)
      float q_off = 0, qu = 0, q_scale = 0;
      for (int c = 0; c < d; ++c) {
        const float qs = q[c] * scale[c];
        q_off += q[c] * offset[c];
        qu += qs * static_cast<float>(GetCode(r + 2, c, bits));
        q_scale += qs;
      }
      return q_off + Fp16ToFp32(LoadU16(r)) * (qu - (static_cast<float>(half) - 0.5f) * q_scale);
    }
    case DigestKind::kMeanKeyPcaQ8:
    case DigestKind::kMeanKeyPcaQ4: {
      const DigestContext& cx = NeedContext(kind, g, ctx);
      const int bits = MeanKeyBits(kind), half = 1 << (bits - 1), rank = cx.rank();
      const uint8_t* r = b + static_cast<int64_t>(kv_head) * (rank * bits / 8 + 2);
      const float* offset = cx.offset(kv_head);
      float q_off = 0;
      for (int c = 0; c < d; ++c) q_off += q[c] * offset[c];
      // sum_i (q . b_i) sigma_i (u_i - half + 1/2) s
      float qu = 0, q_scale = 0;
      for (int i = 0; i < rank; ++i) {
        const float* u = cx.reconstruction(kv_head) + static_cast<int64_t>(i) * d;
        float dot = 0;
        for (int c = 0; c < d; ++c) dot += q[c] * u[c];
        const float qs = dot * cx.component_scale(kv_head)[i];
        qu += qs * static_cast<float>(GetCode(r + 2, i, bits));
        q_scale += qs;
      }
      return q_off + Fp16ToFp32(LoadU16(r)) * (qu - (static_cast<float>(half) - 0.5f) * q_scale);
    }
    case DigestKind::kQuestBoundQ4: {
      const uint8_t* r = b + static_cast<int64_t>(kv_head) * (d + 2);
      const double step = Fp16ToFp32(LoadU16(r));
      // Each product of a float and a small integer is exact in double; the step last.
      double s = 0;
      for (int c = 0; c < d; ++c) {
        const double qc = q[c];
        s += std::max(qc * SignedNibble(r[2 + c] & 0xFu), qc * SignedNibble(r[2 + c] >> 4));
      }
      if (s == 0) return 0;  // also keeps 0 * inf out
      return RoundUpToFloat(s * step);
    }
  }
  return 0;
}

void WindowDigest::EstimateHeads(int n_heads, const float* q, float* out) const {
  QEVICT_CHECK(n_heads > 0 && n_heads % g_.n_kv_heads == 0);
  const int group = n_heads / g_.n_kv_heads;
  for (int h = 0; h < n_heads; ++h)
    out[h] = Estimate(h / group, q + static_cast<int64_t>(h) * g_.head_dim);
}

void WindowDigest::Write(ByteWriter& out) const {
  out.Pod(static_cast<uint8_t>(kind_));
  out.Pod(static_cast<int32_t>(g_.n_kv_heads));
  out.Pod(static_cast<int32_t>(g_.head_dim));
  out.Pod(static_cast<int32_t>(g_.window_tokens));
  out.Array(std::span<const uint8_t>(bytes_));
}

WindowDigest WindowDigest::Read(ByteReader& in, const DigestGeometry& g,
                                std::shared_ptr<const DigestContext> ctx) {
  CheckGeometry(g);
  WindowDigest dg;
  const uint8_t kind = in.Pod<uint8_t>("digest kind");
  if (kind > static_cast<uint8_t>(DigestKind::kMeanKeyPcaQ4)) {
    throw Error("window digest: unknown kind " + std::to_string(kind));
  }
  dg.kind_ = static_cast<DigestKind>(kind);
  const int32_t n = in.Pod<int32_t>("digest KV heads");
  const int32_t d = in.Pod<int32_t>("digest head size");
  const int32_t w = in.Pod<int32_t>("digest window tokens");
  if (n != g.n_kv_heads || d != g.head_dim || w != g.window_tokens) {
    throw Error("window digest: written for " + std::to_string(n) + " KV heads x " +
                std::to_string(d) + " x " + std::to_string(w) + " tokens, read for " +
                std::to_string(g.n_kv_heads) + " x " + std::to_string(g.head_dim) + " x " +
                std::to_string(g.window_tokens));
  }
  dg.g_ = g;
  const int64_t size = DigestBytes(dg.kind_, g);
  dg.bytes_ = in.Array<uint8_t>("digest bytes", static_cast<size_t>(size));
  if (static_cast<int64_t>(dg.bytes_.size()) != size) {
    throw Error("window digest: " + std::to_string(dg.bytes_.size()) + " bytes, " +
                std::to_string(size) + " expected for a " + DigestKindName(dg.kind_) + " digest");
  }
  if (DigestNeedsContext(dg.kind_)) {
    NeedContext(dg.kind_, g, ctx.get());
    dg.ctx_ = std::move(ctx);
  }
  return dg;
}

}  // namespace qevict
