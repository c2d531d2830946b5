// Byte layouts of the GGUF/ggml quantized blocks, bit-exact with files written by llama.cpp.
// Every field is little-endian; fp16 fields are stored as raw IEEE half bits. Blocks appear
// back to back in a row with no padding, and rows need not be aligned, so the structs are
// packed (alignment 1): fields may be read and assigned directly, but never take the address of
// a multi-byte field.
//
// Value of element i of a block (q = the stored quantized value, "d"/"m" the scales):
//   Q4_0: (q - 8) * d                     q = 4 bits: i < 16 low nibble of qs[i], else high of qs[i-16]
//   Q4_1: q * d + m                       same nibbles as Q4_0
//   Q5_0: (q - 16) * d                    q = nibble | bit i of qh (as a little-endian uint32) << 4
//   Q5_1: q * d + m                       same as Q5_0
//   Q8_0: q * d                           q = qs[i] (int8)
//   Q8_1: q * d, s = d * sum(q)           activation format
//   K-quants: 256-element super-blocks; see the per-struct comments.
#pragma once

#include <cstdint>

namespace qevict {

inline constexpr int kQk32 = 32;   // elements per block of the legacy formats
inline constexpr int kQkK = 256;   // elements per K-quant super-block

#pragma pack(push, 1)

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;  // d * sum(qs)
  int8_t qs[32];
};

// Q2_K: 16 sub-blocks of 16. scales[j]: low nibble = scale, high nibble = min of sub-block j.
// Element 128*h + 32*k + l (h < 2, k < 4, l < 32) is (qs[32*h + l] >> 2k) & 3, in sub-block
// 8*h + 2*k + l/16; value = d * scale * q - dmin * min.
struct BlockQ2K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales (stored + 32, packed in 12 bytes). Low two
// bits as in Q2_K; the third bit of element 128*h + 32*k + l is bit (4*h + k) of hmask[l]; a set
// bit means q in 0..3, a clear bit q - 4. value = d * (scale - 32) * q.
struct BlockQ3K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
// Q4_K: 8 sub-blocks of 32 with 6-bit scale and min (packed in 12 bytes, see UnpackScaleMinK4).
// Element 64*k + l (l < 32) is the low nibble of qs[32*k + l] (sub-block 2k), element
// 64*k + 32 + l the high nibble (sub-block 2k+1). value = d * scale * q - dmin * min.
struct BlockQ4K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// Q5_K: Q4_K plus a fifth bit: for element 64*k + l it is bit 2k of qh[l], for 64*k + 32 + l
// bit 2k+1 of qh[l].
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales. In half h (128 elements), for l < 32:
//   element 128h + l      = low nibble of ql[64h + l]      | bits 0-1 of qh[32h + l] << 4
//   element 128h + 32 + l = low nibble of ql[64h + 32 + l] | bits 2-3 of qh[32h + l] << 4
//   element 128h + 64 + l = high nibble of ql[64h + l]     | bits 4-5 of qh[32h + l] << 4
//   element 128h + 96 + l = high nibble of ql[64h + 32 + l]| bits 6-7 of qh[32h + l] << 4
// value = d * scales[element / 16] * (q - 32).
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// Q8_K: activation format of the K-quants. value = d * qs[i]; bsums[j] = sum of qs[16j..16j+16).
struct BlockQ8K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2K) == 84);
static_assert(sizeof(BlockQ3K) == 110);
static_assert(sizeof(BlockQ4K) == 144);
static_assert(sizeof(BlockQ5K) == 176);
static_assert(sizeof(BlockQ6K) == 210);
static_assert(sizeof(BlockQ8K) == 292);
static_assert(alignof(BlockQ8K) == 1 && alignof(BlockQ4K) == 1);

// Scale and min (each 0..63) of sub-block j < 8 of a Q4_K / Q5_K block.
inline void UnpackScaleMinK4(const uint8_t* scales, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Inverse of UnpackScaleMinK4 for all eight sub-blocks (values must be < 64).
inline void PackScaleMinK4(const uint8_t scale[8], const uint8_t min[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(scale[j] | ((scale[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(min[j] | ((min[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((scale[j + 4] & 0x0f) | ((min[j + 4] & 0x0f) << 4));
  }
}

// The sixteen signed scales (-32..31) of a Q3_K block.
inline void UnpackScalesQ3K(const uint8_t packed[12], int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low = (j < 8) ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
    const int high = (packed[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

}  // namespace qevict
