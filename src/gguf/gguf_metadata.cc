// Metadata section: key/value pairs with typed, bounds-checked values.
#include <algorithm>
#include <bit>
#include <string>

#include "gguf/gguf_parse.h"
#include "util/error.h"

namespace qevict::gguf::internal {
namespace {

bool IsPrintableAscii(std::string_view text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

std::string_view ReadKey(ByteReader& reader) {
  const std::string_view key = reader.String("key", kMaxKeyBytes);
  if (key.empty()) throw Error("empty key");
  if (!IsPrintableAscii(key)) {
    throw Error("key '" + Printable(key) + "' contains bytes that are not printable ASCII");
  }
  return key;
}

[[noreturn]] void ThrowBadBool(uint8_t byte, size_t offset) {
  throw Error("bool value " + std::to_string(byte) + " at byte offset " + std::to_string(offset) +
              " is neither 0 nor 1");
}

ValueType ReadValueType(ByteReader& reader, const char* what) {
  const size_t offset = reader.offset();
  const uint32_t id = reader.U32(what);
  if (!IsKnownValueType(id)) {
    throw Error("unknown " + std::string(what) + " " + std::to_string(id) + " at byte offset " +
                std::to_string(offset) + " (known types are 0 to 12)");
  }
  return static_cast<ValueType>(id);
}

// Fills value.array_* and moves the reader past every element, checking each one.
void ReadArray(ByteReader& reader, Value& value) {
  const size_t type_offset = reader.offset();
  value.array_type = ReadValueType(reader, "array element type");
  if (value.array_type == ValueType::kArray) {
    throw Error("nested arrays are not supported (array element type at byte offset " +
                std::to_string(type_offset) + " is array)");
  }
  const size_t length_offset = reader.offset();
  const uint64_t length = reader.U64("array length");
  value.array_size = length;
  value.array_data = reader.current();
  const size_t element_bytes = FixedValueBytes(value.array_type);
  const size_t min_element_bytes = element_bytes != 0 ? element_bytes : 8;  // strings: length
  if (length > reader.remaining() / min_element_bytes) {
    throw Error("array of " + std::to_string(length) + " " + ValueTypeName(value.array_type) +
                " elements (length at byte offset " + std::to_string(length_offset) +
                ") cannot fit in the " + std::to_string(reader.remaining()) +
                " bytes left in the file");
  }
  if (value.array_type == ValueType::kString) {
    for (uint64_t i = 0; i < length; ++i) reader.String("string array element");
    return;
  }
  const uint8_t* elements = reader.Take(length * element_bytes, "array elements");
  if (value.array_type == ValueType::kBool) {
    for (uint64_t i = 0; i < length; ++i) {
      if (elements[i] > 1) ThrowBadBool(elements[i], length_offset + 8 + i);
    }
  }
}

Value ReadValue(ByteReader& reader) {
  Value value{};
  value.type = ReadValueType(reader, "value type");
  switch (value.type) {
    case ValueType::kUint8:
      value.scalar.u64 = reader.U8("uint8 value");
      break;
    case ValueType::kInt8:
      value.scalar.i64 = static_cast<int8_t>(reader.U8("int8 value"));
      break;
    case ValueType::kUint16:
      value.scalar.u64 = reader.U16("uint16 value");
      break;
    case ValueType::kInt16:
      value.scalar.i64 = static_cast<int16_t>(reader.U16("int16 value"));
      break;
    case ValueType::kUint32:
      value.scalar.u64 = reader.U32("uint32 value");
      break;
    case ValueType::kInt32:
      value.scalar.i64 = static_cast<int32_t>(reader.U32("int32 value"));
      break;
    case ValueType::kUint64:
      value.scalar.u64 = reader.U64("uint64 value");
      break;
    case ValueType::kInt64:
      value.scalar.i64 = static_cast<int64_t>(reader.U64("int64 value"));
      break;
    case ValueType::kFloat32:
      value.scalar.f64 = std::bit_cast<float>(reader.U32("float32 value"));
      break;
    case ValueType::kFloat64:
      value.scalar.f64 = std::bit_cast<double>(reader.U64("float64 value"));
      break;
    case ValueType::kBool: {
      const size_t offset = reader.offset();
      const uint8_t byte = reader.U8("bool value");
      if (byte > 1) ThrowBadBool(byte, offset);
      value.scalar.b = byte == 1;
      break;
    }
    case ValueType::kString:
      value.str = reader.String("string value");
      break;
    case ValueType::kArray:
      ReadArray(reader, value);
      break;
  }
  return value;
}

}  // namespace

bool IsKnownValueType(uint32_t type_id) {
  return type_id <= static_cast<uint32_t>(ValueType::kFloat64);
}

size_t FixedValueBytes(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

std::string DescribeType(const Value& value) {
  if (value.type != ValueType::kArray) return ValueTypeName(value.type);
  return std::string("array of ") + ValueTypeName(value.array_type);
}

void ParseMetadata(ByteReader& reader, uint64_t n_kv, std::vector<KeyValue>& kv,
                   NameIndex& kv_index) {
  // n_kv is bounded by the file size, but a crafted file can still claim far more entries than a
  // real model has; reserve for a plausible count and let real entries grow the rest.
  const size_t expected = static_cast<size_t>(std::min<uint64_t>(n_kv, kReserveLimit));
  kv.reserve(expected);
  kv_index.reserve(expected);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t entry_offset = reader.offset();
    const auto where = [&](std::string_view key) {
      std::string out = "metadata entry #" + std::to_string(i);
      if (!key.empty()) out += " (key '" + Printable(key) + "')";
      return out + " at byte offset " + std::to_string(entry_offset) + ": ";
    };
    std::string_view key;
    try {
      key = ReadKey(reader);
    } catch (const Error& e) {
      throw Error(where({}) + e.what());
    }
    try {
      const Value value = ReadValue(reader);
      const auto [it, inserted] = kv_index.emplace(key, kv.size());
      if (!inserted) {
        throw Error("duplicate key (first defined by metadata entry #" +
                    std::to_string(it->second) + ")");
      }
      kv.push_back(KeyValue{key, value});
    } catch (const Error& e) {
      throw Error(where(key) + e.what());
    }
  }
}

uint64_t AlignmentFromMetadata(const Value* value) {
  if (value == nullptr) return kDefaultAlignment;
  if (value->type != ValueType::kUint32) {
    throw Error("metadata key 'general.alignment' has type " + DescribeType(*value) +
                ", expected uint32");
  }
  const uint64_t alignment = value->scalar.u64;
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    throw Error("general.alignment is " + std::to_string(alignment) +
                "; it must be a non-zero power of two");
  }
  if (alignment > kMaxAlignment) {
    throw Error("general.alignment is " + std::to_string(alignment) + ", over the limit of " +
                std::to_string(kMaxAlignment) + " bytes");
  }
  return alignment;
}

}  // namespace qevict::gguf::internal
