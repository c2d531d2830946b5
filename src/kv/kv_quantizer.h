// KIVI-style asymmetric round-to-nearest quantization of one window (docs/kv-cache.md,
// "Quantizer"):
//   keys   per channel within the window: one fp16 scale and zero per (head, channel) over the
//          W tokens, quantized BEFORE RoPE (RoPE is applied at read time from the positions);
//   values per token: one fp16 scale and zero per (head, token, group of value_group channels).
// scale = (max - min) / (2^b - 1), zero = min, code = clamp(round((x - zero) / scale)), where
// scale and zero are first rounded to fp16 so dequantization uses exactly the stored numbers.
//
// Packed code rows: a row of n codes is split into 16-byte groups of 128/b codes; within a group
// code r lives in byte (r % 16) at bit offset b * (r / 16). Eight consecutive codes therefore sit
// in eight consecutive bytes at one shift, which SIMD unpacks with one widening load and a shift.
#pragma once

#include <cstdint>

namespace qevict {

struct QuantLayout {
  int n_kv_heads = 0;
  int window = 0;
  int head_dim = 0;
  int bits = 0;
  int value_group = 0;   // channels per value scale (head_dim when head_dim <= value_group)
  int value_groups = 0;  // scales per value row
  int row_bytes = 0;     // packed codes of one row of head_dim values (multiple of 16)

  // Byte offsets inside one quantized window block:
  int64_t key_codes = 0;     // [n_kv_heads][window][row_bytes]
  int64_t key_scales = 0;    // [n_kv_heads][head_dim] fp16
  int64_t key_zeros = 0;     // [n_kv_heads][head_dim] fp16
  int64_t value_codes = 0;   // [n_kv_heads][window][row_bytes]
  int64_t value_scales = 0;  // [n_kv_heads][window][value_groups] fp16
  int64_t value_zeros = 0;   // [n_kv_heads][window][value_groups] fp16
  int64_t bytes = 0;         // whole block: codes + scales + zeros

  static QuantLayout Make(int n_kv_heads, int window, int head_dim, int bits, int value_group);
};

// Bytes of one packed row of n codes at `bits` bits.
int PackedRowBytes(int n, int bits);
// codes[i] < 2^bits for i < n -> packed row (PackedRowBytes(n, bits) bytes, padding zeroed).
void PackCodes(const uint8_t* codes, int n, int bits, uint8_t* packed);
void UnpackCodes(const uint8_t* packed, int n, int bits, uint8_t* codes);

// Quantizes a full window. keys (before RoPE) and values: [n_kv_heads][window][head_dim] fp32.
void QuantizeWindow(const QuantLayout& layout, const float* keys, const float* values,
                    uint8_t* block);

// Reference (portable, scalar) dequantization of rows [t0, t1) of one head into
// out[(t - t0) * head_dim + d]. Keys come out before RoPE.
void DequantizeKeyRows(const QuantLayout& layout, const uint8_t* block, int head, int t0, int t1,
                       float* out);
void DequantizeValueRows(const QuantLayout& layout, const uint8_t* block, int head, int t0,
                         int t1, float* out);

}  // namespace qevict
