#include "kv/kv_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/error.h"
#include "util/fp16.h"

namespace qevict {
namespace {

struct ScaleZero {
  uint16_t scale_bits;
  uint16_t zero_bits;
  float scale;  // the fp16 values, widened: what dequantization will use
  float zero;
};

ScaleZero ChooseScaleZero(float lo, float hi, int bits) {
  const float levels = static_cast<float>((1 << bits) - 1);
  ScaleZero sz;
  sz.zero_bits = Fp32ToFp16(lo);
  sz.scale_bits = Fp32ToFp16((hi - lo) / levels);
  sz.zero = Fp16ToFp32(sz.zero_bits);
  sz.scale = Fp16ToFp32(sz.scale_bits);
  return sz;
}

// inverse_scale = 1 / scale (0 when the scale is 0: every code is then 0).
uint8_t CodeOf(float x, float zero, float inverse_scale, int max_code) {
  const float v = (x - zero) * inverse_scale;
  if (!(v > 0.5f)) return 0;  // also NaN
  return static_cast<uint8_t>(std::min(static_cast<int>(v + 0.5f), max_code));  // round half up
}

float InverseScale(const ScaleZero& sz) { return sz.scale > 0.0f ? 1.0f / sz.scale : 0.0f; }

uint16_t* Fp16At(uint8_t* block, int64_t offset) {
  return reinterpret_cast<uint16_t*>(block + offset);
}
const uint16_t* Fp16At(const uint8_t* block, int64_t offset) {
  return reinterpret_cast<const uint16_t*>(block + offset);
}

}  // namespace

int PackedRowBytes(int n, int bits) {
  const int per_group = 128 / bits;
  return (n + per_group - 1) / per_group * 16;
}

void PackCodes(const uint8_t* codes, int n, int bits, uint8_t* packed) {
  const int per_group = 128 / bits;
  for (int g0 = 0, byte = 0; g0 < n; g0 += per_group, byte += 16) {
    uint8_t group[16] = {};
    for (int s = 0; s * 16 < per_group; ++s) {
      const int base = g0 + s * 16;
      const int count = std::min(16, n - base);
      for (int i = 0; i < count; ++i) group[i] |= static_cast<uint8_t>(codes[base + i] << (bits * s));
    }
    std::memcpy(packed + byte, group, 16);
  }
}

void UnpackCodes(const uint8_t* packed, int n, int bits, uint8_t* codes) {
  const int per_group = 128 / bits;
  const uint8_t mask = static_cast<uint8_t>((1 << bits) - 1);
  for (int g0 = 0, byte = 0; g0 < n; g0 += per_group, byte += 16) {
    for (int s = 0; s * 16 < per_group; ++s) {
      const int base = g0 + s * 16;
      const int count = std::min(16, n - base);
      for (int i = 0; i < count; ++i) {
        codes[base + i] = static_cast<uint8_t>((packed[byte + i] >> (bits * s)) & mask);
      }
    }
  }
}

QuantLayout QuantLayout::Make(int n_kv_heads, int window, int head_dim, int bits,
                              int value_group) {
  QEVICT_CHECK(n_kv_heads > 0 && window > 0 && head_dim > 0 && head_dim <= 1024 &&
               value_group > 0);
  QEVICT_CHECK(bits == 2 || bits == 4 || bits == 8);
  QuantLayout l;
  l.n_kv_heads = n_kv_heads;
  l.window = window;
  l.head_dim = head_dim;
  l.bits = bits;
  l.value_group = std::min(value_group, head_dim);
  l.value_groups = (head_dim + l.value_group - 1) / l.value_group;
  l.row_bytes = PackedRowBytes(head_dim, bits);
  const int64_t code_bytes = int64_t{n_kv_heads} * window * l.row_bytes;
  const int64_t key_param_bytes = int64_t{n_kv_heads} * head_dim * 2;
  const int64_t value_param_bytes = int64_t{n_kv_heads} * window * l.value_groups * 2;
  l.key_codes = 0;
  l.key_scales = l.key_codes + code_bytes;
  l.key_zeros = l.key_scales + key_param_bytes;
  l.value_codes = l.key_zeros + key_param_bytes;
  l.value_scales = l.value_codes + code_bytes;
  l.value_zeros = l.value_scales + value_param_bytes;
  l.bytes = l.value_zeros + value_param_bytes;
  return l;
}

void QuantizeWindow(const QuantLayout& l, const float* keys, const float* values,
                    uint8_t* block) {
  const int hd = l.head_dim, w = l.window;
  const int max_code = (1 << l.bits) - 1;
  uint8_t codes[1024];
  float lo[1024], hi[1024], zero[1024], inverse[1024];
  for (int h = 0; h < l.n_kv_heads; ++h) {
    const float* kh = keys + static_cast<int64_t>(h) * w * hd;
    // Keys: one scale per channel over the window's tokens.
    std::copy_n(kh, hd, lo);
    std::copy_n(kh, hd, hi);
    for (int t = 1; t < w; ++t) {
      for (int d = 0; d < hd; ++d) {
        lo[d] = std::min(lo[d], kh[t * hd + d]);
        hi[d] = std::max(hi[d], kh[t * hd + d]);
      }
    }
    for (int d = 0; d < hd; ++d) {
      const ScaleZero sz = ChooseScaleZero(lo[d], hi[d], l.bits);
      Fp16At(block, l.key_scales)[h * hd + d] = sz.scale_bits;
      Fp16At(block, l.key_zeros)[h * hd + d] = sz.zero_bits;
      zero[d] = sz.zero;
      inverse[d] = InverseScale(sz);
    }
    for (int t = 0; t < w; ++t) {
      for (int d = 0; d < hd; ++d) codes[d] = CodeOf(kh[t * hd + d], zero[d], inverse[d], max_code);
      PackCodes(codes, hd, l.bits, block + l.key_codes + (int64_t{h} * w + t) * l.row_bytes);
    }
    // Values: one scale per (token, group of channels).
    const float* vh = values + static_cast<int64_t>(h) * w * hd;
    for (int t = 0; t < w; ++t) {
      const float* row = vh + t * hd;
      for (int g = 0; g < l.value_groups; ++g) {
        const int d0 = g * l.value_group, d1 = std::min(hd, d0 + l.value_group);
        const auto [vlo, vhi] = std::minmax_element(row + d0, row + d1);
        const ScaleZero sz = ChooseScaleZero(*vlo, *vhi, l.bits);
        const int64_t p = (int64_t{h} * w + t) * l.value_groups + g;
        Fp16At(block, l.value_scales)[p] = sz.scale_bits;
        Fp16At(block, l.value_zeros)[p] = sz.zero_bits;
        const float inv = InverseScale(sz);
        for (int d = d0; d < d1; ++d) codes[d] = CodeOf(row[d], sz.zero, inv, max_code);
      }
      PackCodes(codes, hd, l.bits, block + l.value_codes + (int64_t{h} * w + t) * l.row_bytes);
    }
  }
}

void DequantizeKeyRows(const QuantLayout& l, const uint8_t* block, int head, int t0, int t1,
                       float* out) {
  const int hd = l.head_dim;
  float scales[1024], zeros[1024];
  for (int d = 0; d < hd; ++d) {
    scales[d] = Fp16ToFp32(Fp16At(block, l.key_scales)[head * hd + d]);
    zeros[d] = Fp16ToFp32(Fp16At(block, l.key_zeros)[head * hd + d]);
  }
  uint8_t codes[1024];
  for (int t = t0; t < t1; ++t) {
    UnpackCodes(block + l.key_codes + (int64_t{head} * l.window + t) * l.row_bytes, hd, l.bits,
                codes);
    float* o = out + static_cast<int64_t>(t - t0) * hd;
    for (int d = 0; d < hd; ++d) o[d] = zeros[d] + scales[d] * codes[d];
  }
}

void DequantizeValueRows(const QuantLayout& l, const uint8_t* block, int head, int t0, int t1,
                         float* out) {
  const int hd = l.head_dim;
  uint8_t codes[1024];
  for (int t = t0; t < t1; ++t) {
    UnpackCodes(block + l.value_codes + (int64_t{head} * l.window + t) * l.row_bytes, hd, l.bits,
                codes);
    const int64_t p = (int64_t{head} * l.window + t) * l.value_groups;
    float* o = out + static_cast<int64_t>(t - t0) * hd;
    for (int g = 0; g < l.value_groups; ++g) {
      const float zero = Fp16ToFp32(Fp16At(block, l.value_zeros)[p + g]);
      const float scale = Fp16ToFp32(Fp16At(block, l.value_scales)[p + g]);
      const int d1 = std::min(hd, (g + 1) * l.value_group);
      for (int d = g * l.value_group; d < d1; ++d) o[d] = zero + scale * codes[d];
    }
  }
}

}  // namespace qevict
