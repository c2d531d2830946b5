// Quantization of fp32 activation rows into the planar formats of activations.h.
#include "quant/activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/activations_impl.h"
#include "quant/block_formats.h"
#include "util/error.h"

namespace qevict {
namespace {

using activations::InterleavedOffset;

size_t AlignUp64(size_t x) { return (x + 63) & ~size_t{63}; }

// round(v) for |v| <= 127.5, ties away from zero, without a libm call.
inline int RoundSmall(float v) { return static_cast<int>(v + (v >= 0.0f ? 0.5f : -0.5f)); }

// Quantizes `count` values with scale 1/id; returns the sum of the codes.
inline int QuantizeRun(const float* x, int count, float id, int8_t* q) {
  int sum = 0;
  for (int i = 0; i < count; ++i) {
    const int v = std::clamp(RoundSmall(x[i] * id), -127, 127);
    q[i] = static_cast<int8_t>(v);
    sum += v;
  }
  return sum;
}

inline float AbsMax(const float* x, int count) {
  float amax = 0.0f;
  for (int i = 0; i < count; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

}  // namespace

ActivationLayout MakeActivationLayout(ActivationFormat format, int64_t n) {
  ActivationLayout layout;
  layout.format = format;
  layout.n = n;
  const size_t un = static_cast<size_t>(n);
  switch (format) {
    case ActivationFormat::kF32:
      layout.row_bytes = AlignUp64(un * sizeof(float));
      break;
    case ActivationFormat::kQ8Block32:
      QEVICT_CHECK(n % kQk32 == 0);
      layout.scale_offset = AlignUp64(un);
      layout.sum_offset = layout.scale_offset + AlignUp64(un / kQk32 * 8 * sizeof(float));
      layout.row_bytes = layout.sum_offset + AlignUp64(un / kQk32 * sizeof(float));
      break;
    case ActivationFormat::kQ8Block32Interleaved:
      // Same section sizes as kQ8Block32 except the unrepeated scales.
      QEVICT_CHECK(n % kQk32 == 0);
      layout.scale_offset = AlignUp64(un);
      layout.sum_offset = layout.scale_offset + AlignUp64(un / kQk32 * sizeof(float));
      layout.row_bytes = layout.sum_offset + AlignUp64(un / kQk32 * sizeof(float));
      break;
    case ActivationFormat::kQ8Block256:
      QEVICT_CHECK(n % kQkK == 0);
      layout.scale_offset = AlignUp64(un);
      layout.sum_offset = layout.scale_offset + AlignUp64(un / kQkK * sizeof(float));
      layout.row_bytes = layout.sum_offset + AlignUp64(un / 16 * sizeof(int16_t));
      break;
  }
  return layout;
}

const float* ActSums(const uint8_t* row, int64_t n) {
  const size_t un = static_cast<size_t>(n);
  return reinterpret_cast<const float*>(row + AlignUp64(un) + AlignUp64(un / kQk32 * 8 * sizeof(float)));
}

const int16_t* ActBsums(const uint8_t* row, int64_t n) {
  const size_t un = static_cast<size_t>(n);
  return reinterpret_cast<const int16_t*>(row + AlignUp64(un) + AlignUp64(un / kQkK * sizeof(float)));
}

namespace activations {

void QuantizeRowPortable(const ActivationLayout& layout, const float* x, uint8_t* dst) {
  const int64_t n = layout.n;
  switch (layout.format) {
    case ActivationFormat::kF32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case ActivationFormat::kQ8Block32: {
      auto* qs = reinterpret_cast<int8_t*>(dst);
      auto* d_wide = reinterpret_cast<float*>(dst + layout.scale_offset);
      auto* sums = reinterpret_cast<float*>(dst + layout.sum_offset);
      for (int64_t b = 0; b < n / kQk32; ++b) {
        const float d = AbsMax(x + b * kQk32, kQk32) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const int sum = QuantizeRun(x + b * kQk32, kQk32, id, qs + b * kQk32);
        for (int lane = 0; lane < 8; ++lane) d_wide[8 * b + lane] = d;
        sums[b] = d * static_cast<float>(sum);
      }
      return;
    }
    case ActivationFormat::kQ8Block32Interleaved: {
      auto* qs = reinterpret_cast<int8_t*>(dst);
      auto* scales = reinterpret_cast<float*>(dst + layout.scale_offset);
      auto* sums = reinterpret_cast<float*>(dst + layout.sum_offset);
      for (int64_t b = 0; b < n / kQk32; ++b) {
        const float d = AbsMax(x + b * kQk32, kQk32) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int8_t codes[kQk32];
        const int sum = QuantizeRun(x + b * kQk32, kQk32, id, codes);
        for (int e = 0; e < kQk32; ++e) qs[InterleavedOffset(n, b, e)] = codes[e];
        scales[b] = d;
        sums[b] = d * static_cast<float>(sum);
      }
      return;
    }
    case ActivationFormat::kQ8Block256: {
      auto* qs = reinterpret_cast<int8_t*>(dst);
      auto* scales = reinterpret_cast<float*>(dst + layout.scale_offset);
      auto* bsums = reinterpret_cast<int16_t*>(dst + layout.sum_offset);
      for (int64_t b = 0; b < n / kQkK; ++b) {
        const float d = AbsMax(x + b * kQkK, kQkK) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        scales[b] = d;
        for (int j = 0; j < 16; ++j) {
          const int64_t at = b * kQkK + 16 * j;
          bsums[at / 16] = static_cast<int16_t>(QuantizeRun(x + at, 16, id, qs + at));
        }
      }
      return;
    }
  }
}

}  // namespace activations

void QuantizeActivationRow(const ActivationLayout& layout, const float* x, uint8_t* dst, SimdLevel level) {
  level = std::min(level, DetectedSimdLevel());
#if defined(__x86_64__)  // the hand-written x86 files (elsewhere the level is always portable)
  if (level >= SimdLevel::kAvx512 && activations::QuantizeRowAvx512(layout, x, dst)) return;
  if (level >= SimdLevel::kAvx2 && activations::QuantizeRowAvx2(layout, x, dst)) return;
#endif
  activations::QuantizeRowPortable(layout, x, dst);
}

void DequantizeActivationRow(const ActivationLayout& layout, const uint8_t* row, float* dst) {
  const int64_t n = layout.n;
  const int8_t* qs = ActQs(row);
  switch (layout.format) {
    case ActivationFormat::kF32:
      std::memcpy(dst, row, static_cast<size_t>(n) * sizeof(float));
      return;
    case ActivationFormat::kQ8Block32: {
      const float* d_wide = ActScales(row, n);
      for (int64_t i = 0; i < n; ++i) dst[i] = d_wide[8 * (i / kQk32)] * static_cast<float>(qs[i]);
      return;
    }
    case ActivationFormat::kQ8Block32Interleaved: {
      const auto* d = reinterpret_cast<const float*>(row + layout.scale_offset);
      for (int64_t i = 0; i < n; ++i) {
        dst[i] = d[i / kQk32] * static_cast<float>(qs[InterleavedOffset(n, i / kQk32, static_cast<int>(i % kQk32))]);
      }
      return;
    }
    case ActivationFormat::kQ8Block256: {
      const float* d = ActScales(row, n);
      for (int64_t i = 0; i < n; ++i) dst[i] = d[i / kQkK] * static_cast<float>(qs[i]);
      return;
    }
  }
}

}  // namespace qevict
