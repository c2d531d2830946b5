// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the disk cold store's
// blocks (disk_cold_store.h). SSE4.2's CRC32 instruction where the CPU has it (x86-64 at the AVX2
// level, chosen at run time), else a portable table-driven version, slicing by 8 bytes (an ARMv8
// CRC instruction path is not written yet).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qevict {

// The CRC-32C of n bytes, continuing from `crc` (0 for a fresh checksum; pass a previous
// result to extend it over more bytes). Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);
// The table-driven version whatever the CPU (tests compare the two).
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc = 0);

}  // namespace qevict
