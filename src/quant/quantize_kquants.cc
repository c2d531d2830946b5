// Round-to-nearest quantizers for the K-quant super-blocks. Each sub-block gets its own scale
// (and min for the asymmetric formats); those are quantized against one fp16 super-scale, and
// the values are then quantized against the effective, already-rounded sub-block scale.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/block_formats.h"
#include "quant/quantize_common.h"
#include "quant/quantize_impl.h"
#include "util/fp16.h"

namespace qevict::quantize {
namespace {

float RoundToHalf(float x, uint16_t* bits) {
  *bits = Fp32ToFp16(x);
  return Fp16ToFp32(*bits);
}

// Asymmetric sub-block codes shared by Q2_K, Q4_K and Q5_K: x ~ d * scale * q - dmin * min with
// q in [0, levels], scale and min in [0, scale_levels].
struct AsymmetricSuperBlock {
  int scale[16];
  int min[16];
  int q[kQkK];
};

void QuantizeAsymmetric(const float* x, int n_sub, int levels, int scale_levels, uint16_t* d_bits,
                        uint16_t* dmin_bits, AsymmetricSuperBlock* out) {
  const int sub_size = kQkK / n_sub;
  float sub_scale[16], sub_min[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    const float* s = x + j * sub_size;
    float lo = 0.0f, hi = s[0];
    for (int i = 0; i < sub_size; ++i) {
      lo = std::min(lo, s[i]);
      hi = std::max(hi, s[i]);
    }
    sub_scale[j] = (hi - lo) / static_cast<float>(levels);
    sub_min[j] = -lo;
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  const float d = RoundToHalf(max_scale / static_cast<float>(scale_levels), d_bits);
  const float dmin = RoundToHalf(max_min / static_cast<float>(scale_levels), dmin_bits);
  for (int j = 0; j < n_sub; ++j) {
    out->scale[j] = RoundClamp(sub_scale[j] * InverseOrZero(d), 0, scale_levels);
    out->min[j] = RoundClamp(sub_min[j] * InverseOrZero(dmin), 0, scale_levels);
    const float ds = d * static_cast<float>(out->scale[j]);
    const float dm = dmin * static_cast<float>(out->min[j]);
    const float ids = InverseOrZero(ds);
    for (int i = 0; i < sub_size; ++i) {
      out->q[j * sub_size + i] = RoundClamp((x[j * sub_size + i] + dm) * ids, 0, levels);
    }
  }
}

// Symmetric sub-block codes shared by Q3_K and Q6_K: x ~ d * scale * q, q in [-half, half),
// scale in [-scale_half, scale_half).
struct SymmetricSuperBlock {
  int scale[16];
  int q[kQkK];
};

void QuantizeSymmetric(const float* x, int half, int scale_half, uint16_t* d_bits,
                       SymmetricSuperBlock* out) {
  constexpr int kSub = 16;
  float sub_scale[kSub];
  float max_abs = 0.0f;
  for (int j = 0; j < kSub; ++j) {
    sub_scale[j] = SignedAbsMax(x + 16 * j, 16) / static_cast<float>(-half);
    max_abs = std::max(max_abs, std::fabs(sub_scale[j]));
  }
  const float d = RoundToHalf(max_abs / static_cast<float>(scale_half - 1), d_bits);
  for (int j = 0; j < kSub; ++j) {
    out->scale[j] = RoundClamp(sub_scale[j] * InverseOrZero(d), -scale_half, scale_half - 1);
    const float ids = InverseOrZero(d * static_cast<float>(out->scale[j]));
    for (int i = 0; i < 16; ++i) out->q[16 * j + i] = RoundClamp(x[16 * j + i] * ids, -half, half - 1);
  }
}

}  // namespace

void Q2K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ2K*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b, src += kQkK) {
    BlockQ2K& y = blocks[b];
    AsymmetricSuperBlock codes;
    uint16_t d, dmin;
    QuantizeAsymmetric(src, 16, 3, 15, &d, &dmin, &codes);
    y.d = d;
    y.dmin = dmin;
    for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(codes.scale[j] | (codes.min[j] << 4));
    std::memset(y.qs, 0, sizeof y.qs);
    for (int e = 0; e < kQkK; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      y.qs[32 * h + l] |= static_cast<uint8_t>(codes.q[e] << (2 * k));
    }
  }
}

void Q3K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ3K*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b, src += kQkK) {
    BlockQ3K& y = blocks[b];
    SymmetricSuperBlock codes;
    uint16_t d;
    QuantizeSymmetric(src, 4, 32, &d, &codes);
    y.d = d;
    std::memset(y.scales, 0, sizeof y.scales);
    for (int j = 0; j < 16; ++j) {
      const int u = codes.scale[j] + 32;
      if (j < 8) {
        y.scales[j] |= static_cast<uint8_t>(u & 0x0f);
      } else {
        y.scales[j - 8] |= static_cast<uint8_t>((u & 0x0f) << 4);
      }
      y.scales[8 + (j & 3)] |= static_cast<uint8_t>((u >> 4) << (2 * (j >> 2)));
    }
    std::memset(y.qs, 0, sizeof y.qs);
    std::memset(y.hmask, 0, sizeof y.hmask);
    for (int e = 0; e < kQkK; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int u = codes.q[e] + 4;  // 0..7
      y.qs[32 * h + l] |= static_cast<uint8_t>((u & 3) << (2 * k));
      y.hmask[l] |= static_cast<uint8_t>((u >> 2) << (4 * h + k));
    }
  }
}

void Q4K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4K*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b, src += kQkK) {
    BlockQ4K& y = blocks[b];
    AsymmetricSuperBlock codes;
    uint16_t d, dmin;
    QuantizeAsymmetric(src, 8, 15, 63, &d, &dmin, &codes);
    y.d = d;
    y.dmin = dmin;
    uint8_t scale[8], min[8];
    for (int j = 0; j < 8; ++j) {
      scale[j] = static_cast<uint8_t>(codes.scale[j]);
      min[j] = static_cast<uint8_t>(codes.min[j]);
    }
    PackScaleMinK4(scale, min, y.scales);
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        y.qs[32 * k + l] = static_cast<uint8_t>(codes.q[64 * k + l] | (codes.q[64 * k + 32 + l] << 4));
      }
    }
  }
}

void Q5K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5K*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b, src += kQkK) {
    BlockQ5K& y = blocks[b];
    AsymmetricSuperBlock codes;
    uint16_t d, dmin;
    QuantizeAsymmetric(src, 8, 31, 63, &d, &dmin, &codes);
    y.d = d;
    y.dmin = dmin;
    uint8_t scale[8], min[8];
    for (int j = 0; j < 8; ++j) {
      scale[j] = static_cast<uint8_t>(codes.scale[j]);
      min[j] = static_cast<uint8_t>(codes.min[j]);
    }
    PackScaleMinK4(scale, min, y.scales);
    std::memset(y.qh, 0, sizeof y.qh);
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const int lo = codes.q[64 * k + l], hi = codes.q[64 * k + 32 + l];
        y.qs[32 * k + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        y.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * k)) | ((hi >> 4) << (2 * k + 1)));
      }
    }
  }
}

void Q6K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ6K*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b, src += kQkK) {
    BlockQ6K& y = blocks[b];
    SymmetricSuperBlock codes;
    uint16_t d;
    QuantizeSymmetric(src, 32, 128, &d, &codes);
    y.d = d;
    for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<int8_t>(codes.scale[j]);
    std::memset(y.qh, 0, sizeof y.qh);
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        int u[4];
        for (int quarter = 0; quarter < 4; ++quarter) u[quarter] = codes.q[128 * h + 32 * quarter + l] + 32;
        y.ql[64 * h + l] = static_cast<uint8_t>((u[0] & 0x0f) | ((u[2] & 0x0f) << 4));
        y.ql[64 * h + 32 + l] = static_cast<uint8_t>((u[1] & 0x0f) | ((u[3] & 0x0f) << 4));
        y.qh[32 * h + l] = static_cast<uint8_t>((u[0] >> 4) | ((u[1] >> 4) << 2) | ((u[2] >> 4) << 4) |
                                                ((u[3] >> 4) << 6));
      }
    }
  }
}

void Q8K(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8K*>(dst);
  for (int64_t b = 0; b < n / kQkK; ++b, src += kQkK) {
    BlockQ8K& y = blocks[b];
    float amax = 0.0f;
    for (int i = 0; i < kQkK; ++i) amax = std::max(amax, std::fabs(src[i]));
    y.d = amax / 127.0f;
    const float id = InverseOrZero(y.d);
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) {
        y.qs[i] = static_cast<int8_t>(RoundClamp(src[i] * id, -127, 127));
        sum += y.qs[i];
      }
      y.bsums[j] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace qevict::quantize
