// GGUF (v2, v3) reader. The file is memory-mapped; strings, arrays and tensor data are views into
// the map, never copies. Every structural problem in the file (see docs/security.md) is reported
// as qevict::Error with a message naming what is wrong and where; nothing is trusted before it is
// checked against the bytes actually present.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quant/ggml_type.h"
#include "util/mapped_file.h"

namespace qevict::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
// "uint8", ..., "string", "array", "float64"; "unknown" for ids outside the enum.
const char* ValueTypeName(ValueType t);

// Limits enforced by the parser (beyond "fits in the file").
inline constexpr uint64_t kMaxKeyBytes = 65535;      // GGUF spec: keys are < 2^16 bytes
inline constexpr uint64_t kMaxTensorNameBytes = 63;  // ggml: 64 bytes including the NUL
inline constexpr int kMaxDims = 4;
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 20;  // 1 MiB

// One metadata value. Scalars are decoded; strings and arrays point into the mapped file.
// Which scalar member is set: unsigned integers -> u64, signed integers -> i64 (sign-extended),
// float32/float64 -> f64, bool -> b. Prefer the typed getters of File over reading it directly.
// Arrays: every element was validated at parse time (strings lie inside the file, bools are 0/1);
// elements are little-endian and possibly unaligned: decode them byte-wise or with memcpy.
struct Value {
  ValueType type;
  ValueType array_type = ValueType::kUint8;  // element type when type == kArray
  uint64_t array_size = 0;                   // element count when type == kArray
  const uint8_t* array_data = nullptr;       // first element (for strings: first length prefix)
  union {
    uint64_t u64;
    int64_t i64;
    double f64;
    bool b;
  } scalar{};
  std::string_view str;  // when type == kString
};

struct KeyValue {
  std::string_view key;
  Value value;
};

struct TensorInfo {
  std::string_view name;
  GgmlType type;
  int n_dims;
  int64_t ne[4];    // ne[0] is the row length (contiguous), as in ggml; unused dims are 1
  uint64_t offset;  // relative to the start of the data section
  size_t n_bytes;
  const uint8_t* data;  // points into the mapped file

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Maps and parses the file. Throws qevict::Error on any malformed content.
  static std::unique_ptr<File> Open(const std::string& path);
  // Parses bytes owned by the caller (fuzzing, tests); they must outlive the File.
  static std::unique_ptr<File> Parse(std::span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return bytes_.size(); }
  const std::vector<KeyValue>& metadata() const { return kv_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Absolute byte offset of the data section (tensor offsets are relative to it): the end of the
  // tensor infos rounded up to alignment(). May lie past the end of a file without tensors.
  uint64_t data_offset() const { return data_offset_; }

  const Value* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Typed access. Get* throw Error when the key is missing or has another type (message names
  // the key, the stored type and the expected type); Find* return nullopt when missing and throw
  // on a type mismatch. Integer getters accept any integer type whose value fits.
  int64_t GetInt(std::string_view key) const;
  std::optional<int64_t> FindInt(std::string_view key) const;
  double GetFloat(std::string_view key) const;  // float32 or float64
  std::optional<double> FindFloat(std::string_view key) const;
  bool GetBool(std::string_view key) const;
  std::optional<bool> FindBool(std::string_view key) const;
  std::string_view GetString(std::string_view key) const;
  std::optional<std::string_view> FindString(std::string_view key) const;
  // Array access; the element type must match exactly.
  std::vector<std::string_view> GetStringArray(std::string_view key) const;
  std::vector<float> GetFloatArray(std::string_view key) const;
  std::vector<int32_t> GetInt32Array(std::string_view key) const;

  const TensorInfo* FindTensor(std::string_view name) const;

 private:
  File() = default;
  void ParseAll();

  std::unique_ptr<MappedFile> map_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kv_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> kv_index_;      // key -> index in kv_
  std::unordered_map<std::string_view, size_t> tensor_index_;  // name -> index in tensors_
};

}  // namespace qevict::gguf
