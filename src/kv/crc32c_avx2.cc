// CRC-32C with SSE4.2's CRC32 instruction (compiled with the AVX2 level's flags, which include
// SSE4.2; chosen at run time by crc32c.cc): 8 bytes a step, about four times the tables' speed
// in one stream (6 GB/s against 1.5 on the reference machine).
#include <nmmintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace qevict {

uint32_t Crc32cAvx2(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}

}  // namespace qevict
