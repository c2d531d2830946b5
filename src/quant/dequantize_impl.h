// Per-type row dequantizers behind DequantizeRow (ggml_type.h). n is always a multiple of the
// type's block size; src points at n / block_size consecutive blocks.
#pragma once

#include <cstdint>

namespace qevict::dequant {

void F32(const void* src, float* dst, int64_t n);
void F16(const void* src, float* dst, int64_t n);
void BF16(const void* src, float* dst, int64_t n);

void Q4_0(const void* src, float* dst, int64_t n);
void Q4_1(const void* src, float* dst, int64_t n);
void Q5_0(const void* src, float* dst, int64_t n);
void Q5_1(const void* src, float* dst, int64_t n);
void Q8_0(const void* src, float* dst, int64_t n);
void Q8_1(const void* src, float* dst, int64_t n);

void Q2K(const void* src, float* dst, int64_t n);
void Q3K(const void* src, float* dst, int64_t n);
void Q4K(const void* src, float* dst, int64_t n);
void Q5K(const void* src, float* dst, int64_t n);
void Q6K(const void* src, float* dst, int64_t n);
void Q8K(const void* src, float* dst, int64_t n);

}  // namespace qevict::dequant
