#include "kv/window_digest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/error.h"
#include "util/fp16.h"

namespace qevict {
namespace {

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

}  // namespace

const char* DigestKindName(DigestKind kind) {
  switch (kind) {
    case DigestKind::kQuestBound:
      return "quest-minmax";
    case DigestKind::kSignSketch:
      return "sign-sketch";
    case DigestKind::kMeanKey:
      return "mean-key";
  }
  return "?";
}

DigestKind ParseDigestKind(std::string_view name) {
  std::string accepted;
  for (DigestKind kind : {DigestKind::kQuestBound, DigestKind::kSignSketch, DigestKind::kMeanKey}) {
    if (name == DigestKindName(kind)) return kind;
    accepted += accepted.empty() ? "" : ", ";
    accepted += DigestKindName(kind);
  }
  throw Error("unknown window digest '" + std::string(name) + "' (accepted: " + accepted + ")");
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
  }
  return 0;
}

int64_t WindowFp16Bytes(const DigestGeometry& g) {
  return int64_t{2} * g.n_kv_heads * g.window_tokens * g.head_dim * 2;
}

namespace {

template <class Key>
void BuildDigest(DigestKind kind, const DigestGeometry& g, const Key* keys, uint8_t* out) {
  CheckGeometry(g);
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
    }
  }
}

}  // namespace

void WindowDigest::BuildInto(DigestKind kind, const DigestGeometry& g, const float* keys,
                             uint8_t* out) {
  BuildDigest(kind, g, keys, out);
}

void WindowDigest::BuildIntoFromFp16(DigestKind kind, const DigestGeometry& g, const uint16_t* keys,
                                     uint8_t* out) {
  BuildDigest(kind, g, keys, out);
}

WindowDigest WindowDigest::Build(DigestKind kind, const DigestGeometry& g, const float* keys) {
  WindowDigest dg = Empty(kind, g);
  BuildDigest(kind, g, keys, dg.bytes_.data());
  return dg;
}

WindowDigest WindowDigest::BuildFromFp16(DigestKind kind, const DigestGeometry& g,
                                         const uint16_t* keys) {
  WindowDigest dg = Empty(kind, g);
  BuildDigest(kind, g, keys, dg.bytes_.data());
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
  return EstimateBytes(kind_, g_, bytes_.data(), kv_head, q);
}

float WindowDigest::EstimateBytes(DigestKind kind, const DigestGeometry& g, const uint8_t* b,
                                  int kv_head, const float* q) {
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
      float f = static_cast<float>(s);
      if (static_cast<double>(f) < s) f = std::nextafter(f, std::numeric_limits<float>::infinity());
      return f;
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

WindowDigest WindowDigest::Read(ByteReader& in, const DigestGeometry& g) {
  CheckGeometry(g);
  WindowDigest dg;
  const uint8_t kind = in.Pod<uint8_t>("digest kind");
  if (kind > static_cast<uint8_t>(DigestKind::kMeanKey)) {
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
  return dg;
}

}  // namespace qevict
