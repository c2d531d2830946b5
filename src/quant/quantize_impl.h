// Per-type row quantizers behind QuantizeRow (quantize.h).
#pragma once

#include <cstdint>

namespace qevict::quantize {

void F32(const float* src, void* dst, int64_t n);
void F16(const float* src, void* dst, int64_t n);
void BF16(const float* src, void* dst, int64_t n);

void Q4_0(const float* src, void* dst, int64_t n);
void Q4_1(const float* src, void* dst, int64_t n);
void Q5_0(const float* src, void* dst, int64_t n);
void Q5_1(const float* src, void* dst, int64_t n);
void Q8_0(const float* src, void* dst, int64_t n);
void Q8_1(const float* src, void* dst, int64_t n);

void Q2K(const float* src, void* dst, int64_t n);
void Q3K(const float* src, void* dst, int64_t n);
void Q4K(const float* src, void* dst, int64_t n);
void Q5K(const float* src, void* dst, int64_t n);
void Q6K(const float* src, void* dst, int64_t n);
void Q8K(const float* src, void* dst, int64_t n);

}  // namespace qevict::quantize
