// Internal steps of File::ParseAll, one per section of a GGUF file. Each step reads from a
// ByteReader positioned at its section and throws qevict::Error on malformed input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_reader.h"

namespace qevict::gguf::internal {

// Smallest possible encodings, used to bound counts by the bytes left before any allocation:
// a metadata entry is a key (8-byte length), a 4-byte type and at least 1 byte of value; a tensor
// info is a name (8-byte length), n_dims (4), one dim (8), type (4) and offset (8). Empty keys and
// names count as possible here so that they get their own, clearer, error later.
inline constexpr uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;
inline constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
inline constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;
// Up to this many metadata entries or tensors are reserved up front from the header's counts.
inline constexpr uint64_t kReserveLimit = 4096;

struct Header {
  uint32_t version = 0;
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
};

// Magic, version (2 or 3, little-endian) and the two counts, which are checked against the
// bytes that follow.
Header ParseHeader(ByteReader& reader);

using NameIndex = std::unordered_map<std::string_view, size_t>;

// n_kv key/value pairs. Keys are non-empty printable ASCII, at most kMaxKeyBytes, unique.
void ParseMetadata(ByteReader& reader, uint64_t n_kv, std::vector<KeyValue>& kv,
                   NameIndex& kv_index);

// general.alignment when present (uint32, power of two, at most kMaxAlignment), else 32.
uint64_t AlignmentFromMetadata(const Value* alignment_value);

struct TensorTable {
  std::vector<TensorInfo> tensors;
  NameIndex index;
  uint64_t data_offset = 0;
};

// n_tensors tensor infos, then the layout of the data section: every tensor aligned, inside the
// file, and not overlapping another.
TensorTable ParseTensorInfos(ByteReader& reader, uint64_t n_tensors, uint64_t alignment);

// "uint32", "string", "array of int32": how a value is described in type-mismatch messages.
std::string DescribeType(const Value& value);

// Bytes of one element of a fixed-size type; 0 for string, array and unknown types.
size_t FixedValueBytes(ValueType type);

bool IsKnownValueType(uint32_t type_id);

}  // namespace qevict::gguf::internal
