// Dequantization of the 256-element K-quant super-blocks (Q2_K .. Q6_K, Q8_K). Bit layouts are
// documented on the block structs in block_formats.h.
#include "quant/block_formats.h"
#include "quant/dequantize_impl.h"
#include "util/fp16.h"

namespace qevict::dequant {

void Q2K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ2K*>(src);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ2K& x = blocks[b];
    const float d = Fp16ToFp32(x.d);
    const float dmin = Fp16ToFp32(x.dmin);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          const int sub = 8 * h + 2 * k + l / 16;
          const int q = (x.qs[32 * h + l] >> (2 * k)) & 3;
          *dst++ = d * static_cast<float>(x.scales[sub] & 0x0f) * static_cast<float>(q) -
                   dmin * static_cast<float>(x.scales[sub] >> 4);
        }
      }
    }
  }
}

void Q3K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ3K*>(src);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ3K& x = blocks[b];
    const float d = Fp16ToFp32(x.d);
    int8_t scales[16];
    UnpackScalesQ3K(x.scales, scales);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          const int sub = 8 * h + 2 * k + l / 16;
          const int low = (x.qs[32 * h + l] >> (2 * k)) & 3;
          const int q = low - (((x.hmask[l] >> (4 * h + k)) & 1) ? 0 : 4);
          *dst++ = d * static_cast<float>(scales[sub]) * static_cast<float>(q);
        }
      }
    }
  }
}

void Q4K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4K*>(src);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ4K& x = blocks[b];
    const float d = Fp16ToFp32(x.d);
    const float dmin = Fp16ToFp32(x.dmin);
    for (int k = 0; k < 4; ++k) {
      for (int half = 0; half < 2; ++half) {
        int scale, min;
        UnpackScaleMinK4(x.scales, 2 * k + half, &scale, &min);
        const float ds = d * static_cast<float>(scale);
        const float dm = dmin * static_cast<float>(min);
        for (int l = 0; l < 32; ++l) {
          const int q = (x.qs[32 * k + l] >> (4 * half)) & 0x0f;
          *dst++ = ds * static_cast<float>(q) - dm;
        }
      }
    }
  }
}

void Q5K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5K*>(src);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ5K& x = blocks[b];
    const float d = Fp16ToFp32(x.d);
    const float dmin = Fp16ToFp32(x.dmin);
    for (int k = 0; k < 4; ++k) {
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * k + half;
        int scale, min;
        UnpackScaleMinK4(x.scales, sub, &scale, &min);
        const float ds = d * static_cast<float>(scale);
        const float dm = dmin * static_cast<float>(min);
        for (int l = 0; l < 32; ++l) {
          const int q = ((x.qs[32 * k + l] >> (4 * half)) & 0x0f) | (((x.qh[l] >> sub) & 1) << 4);
          *dst++ = ds * static_cast<float>(q) - dm;
        }
      }
    }
  }
}

void Q6K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ6K*>(src);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const BlockQ6K& x = blocks[b];
    const float d = Fp16ToFp32(x.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x.ql + 64 * h;
      const uint8_t* qh = x.qh + 32 * h;
      for (int quarter = 0; quarter < 4; ++quarter) {
        // quarter 0: low nibbles of ql[0..32), 1: low of ql[32..64), 2: high of ql[0..32), 3: high
        // of ql[32..64); the top two bits come from qh[l] >> (2 * quarter).
        const uint8_t* lows = ql + 32 * (quarter & 1);
        const int nibble_shift = 4 * (quarter >> 1);
        for (int l = 0; l < 32; ++l) {
          const int q = ((lows[l] >> nibble_shift) & 0x0f) | (((qh[l] >> (2 * quarter)) & 3) << 4);
          const int element = 128 * h + 32 * quarter + l;
          *dst++ = d * static_cast<float>(x.scales[element / 16]) * static_cast<float>(q - 32);
        }
      }
    }
  }
}

void Q8K(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8K*>(src);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    for (int i = 0; i < kQkK; ++i) *dst++ = blocks[b].d * static_cast<float>(blocks[b].qs[i]);
  }
}

}  // namespace qevict::dequant
