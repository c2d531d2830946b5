// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the disk cold store's
// blocks (disk_cold_store.h). A portable table-driven version, slicing by 8 bytes; an SSE4.2 /
// ARMv8 CRC instruction path can replace it if reads ever become checksum-bound.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qevict {

// The CRC-32C of n bytes, continuing from `crc` (0 for a fresh checksum; pass a previous
// result to extend it over more bytes). Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace qevict
