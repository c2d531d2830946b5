// Typed metadata access: every getter names the key, the stored type and the expected type when
// they disagree.
#include <bit>
#include <cstdint>
#include <limits>

#include "gguf/gguf.h"
#include "gguf/gguf_parse.h"
#include "util/error.h"

namespace qevict::gguf {
namespace {

using internal::ByteReader;
using internal::DescribeType;
using internal::Printable;

[[noreturn]] void ThrowMissing(std::string_view key) {
  throw Error("missing metadata key '" + Printable(key) + "'");
}

[[noreturn]] void ThrowWrongType(std::string_view key, const Value& value,
                                 std::string_view expected) {
  throw Error("metadata key '" + Printable(key) + "' has type " + DescribeType(value) +
              ", expected " + std::string(expected));
}

bool IsUnsignedInteger(ValueType t) {
  return t == ValueType::kUint8 || t == ValueType::kUint16 || t == ValueType::kUint32 ||
         t == ValueType::kUint64;
}

bool IsSignedInteger(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}

// The array stored under key, whose elements must be of type element_type.
const Value& GetArray(const File& file, std::string_view key, ValueType element_type) {
  const Value* value = file.Find(key);
  if (value == nullptr) ThrowMissing(key);
  if (value->type != ValueType::kArray || value->array_type != element_type) {
    ThrowWrongType(key, *value, std::string("array of ") + ValueTypeName(element_type));
  }
  return *value;
}

// The bytes from an array's first element to the end of the file. Bounds were validated at parse
// time; reading through a bounded reader again keeps access safe even so.
std::span<const uint8_t> ArrayBytes(std::span<const uint8_t> all, const Value& value) {
  const size_t start = static_cast<size_t>(value.array_data - all.data());
  return all.subspan(start);
}

template <typename T, typename Decode>
std::vector<T> GetFixedArray(const File& file, std::span<const uint8_t> all, std::string_view key,
                             ValueType element_type, Decode decode) {
  const Value& value = GetArray(file, key, element_type);
  ByteReader reader(ArrayBytes(all, value));
  const uint8_t* data = reader.Take(value.array_size * sizeof(T), "array elements");
  std::vector<T> out(static_cast<size_t>(value.array_size));
  for (size_t i = 0; i < out.size(); ++i) out[i] = decode(data + i * sizeof(T));
  return out;
}

}  // namespace

std::optional<int64_t> File::FindInt(std::string_view key) const {
  const Value* value = Find(key);
  if (value == nullptr) return std::nullopt;
  if (IsSignedInteger(value->type)) return value->scalar.i64;
  if (!IsUnsignedInteger(value->type)) ThrowWrongType(key, *value, "an integer");
  if (value->scalar.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error("metadata key '" + Printable(key) + "' has value " +
                std::to_string(value->scalar.u64) + ", which does not fit in int64");
  }
  return static_cast<int64_t>(value->scalar.u64);
}

int64_t File::GetInt(std::string_view key) const {
  const std::optional<int64_t> value = FindInt(key);
  if (!value) ThrowMissing(key);
  return *value;
}

std::optional<double> File::FindFloat(std::string_view key) const {
  const Value* value = Find(key);
  if (value == nullptr) return std::nullopt;
  if (value->type != ValueType::kFloat32 && value->type != ValueType::kFloat64) {
    ThrowWrongType(key, *value, "a float (float32 or float64)");
  }
  return value->scalar.f64;
}

double File::GetFloat(std::string_view key) const {
  const std::optional<double> value = FindFloat(key);
  if (!value) ThrowMissing(key);
  return *value;
}

std::optional<bool> File::FindBool(std::string_view key) const {
  const Value* value = Find(key);
  if (value == nullptr) return std::nullopt;
  if (value->type != ValueType::kBool) ThrowWrongType(key, *value, "a bool");
  return value->scalar.b;
}

bool File::GetBool(std::string_view key) const {
  const std::optional<bool> value = FindBool(key);
  if (!value) ThrowMissing(key);
  return *value;
}

std::optional<std::string_view> File::FindString(std::string_view key) const {
  const Value* value = Find(key);
  if (value == nullptr) return std::nullopt;
  if (value->type != ValueType::kString) ThrowWrongType(key, *value, "a string");
  return value->str;
}

std::string_view File::GetString(std::string_view key) const {
  const std::optional<std::string_view> value = FindString(key);
  if (!value) ThrowMissing(key);
  return *value;
}

std::vector<std::string_view> File::GetStringArray(std::string_view key) const {
  const Value& value = GetArray(*this, key, ValueType::kString);
  ByteReader reader(ArrayBytes(bytes_, value));
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(value.array_size));  // validated against the file size
  for (uint64_t i = 0; i < value.array_size; ++i) out.push_back(reader.String("string element"));
  return out;
}

std::vector<float> File::GetFloatArray(std::string_view key) const {
  return GetFixedArray<float>(*this, bytes_, key, ValueType::kFloat32, [](const uint8_t* p) {
    return std::bit_cast<float>(internal::LoadLe32(p));
  });
}

std::vector<int32_t> File::GetInt32Array(std::string_view key) const {
  return GetFixedArray<int32_t>(*this, bytes_, key, ValueType::kInt32, [](const uint8_t* p) {
    return static_cast<int32_t>(internal::LoadLe32(p));
  });
}

}  // namespace qevict::gguf
