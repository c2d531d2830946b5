// In-memory GGUF writer for tests only: builds valid files and, through its overrides, files that
// are malformed in exactly one way. Not part of the library (nothing outside *_test.cc includes
// it).
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "quant/ggml_type.h"

namespace qevict::gguf::testing {

// Little-endian byte sink.
class ByteWriter {
 public:
  void U8(uint8_t v) { bytes_.push_back(v); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void F32(float v) { U32(std::bit_cast<uint32_t>(v)); }
  void F64(double v) { U64(std::bit_cast<uint64_t>(v)); }
  void Str(std::string_view s) {
    U64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void Raw(const std::vector<uint8_t>& raw) { bytes_.insert(bytes_.end(), raw.begin(), raw.end()); }
  void PadTo(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  void Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> bytes_;
};

// A metadata value as it appears after its key: the type id, then the payload.
struct EncodedValue {
  uint32_t type;
  std::vector<uint8_t> payload;
};

// Encoders for every value type. Array payloads: element type, uint64 count, elements.
namespace val {

template <typename Fn>
EncodedValue Encode(ValueType type, Fn write) {
  ByteWriter w;
  write(w);
  return {static_cast<uint32_t>(type), std::move(w.bytes())};
}
inline EncodedValue U8(uint8_t v) {
  return Encode(ValueType::kUint8, [&](ByteWriter& w) { w.U8(v); });
}
inline EncodedValue I8(int8_t v) {
  return Encode(ValueType::kInt8, [&](ByteWriter& w) { w.U8(static_cast<uint8_t>(v)); });
}
inline EncodedValue U16(uint16_t v) {
  return Encode(ValueType::kUint16, [&](ByteWriter& w) { w.U16(v); });
}
inline EncodedValue I16(int16_t v) {
  return Encode(ValueType::kInt16, [&](ByteWriter& w) { w.U16(static_cast<uint16_t>(v)); });
}
inline EncodedValue U32(uint32_t v) {
  return Encode(ValueType::kUint32, [&](ByteWriter& w) { w.U32(v); });
}
inline EncodedValue I32(int32_t v) {
  return Encode(ValueType::kInt32, [&](ByteWriter& w) { w.U32(static_cast<uint32_t>(v)); });
}
inline EncodedValue U64(uint64_t v) {
  return Encode(ValueType::kUint64, [&](ByteWriter& w) { w.U64(v); });
}
inline EncodedValue I64(int64_t v) {
  return Encode(ValueType::kInt64, [&](ByteWriter& w) { w.U64(static_cast<uint64_t>(v)); });
}
inline EncodedValue F32(float v) {
  return Encode(ValueType::kFloat32, [&](ByteWriter& w) { w.F32(v); });
}
inline EncodedValue F64(double v) {
  return Encode(ValueType::kFloat64, [&](ByteWriter& w) { w.F64(v); });
}
inline EncodedValue Bool(bool v) {
  return Encode(ValueType::kBool, [&](ByteWriter& w) { w.U8(v ? 1 : 0); });
}
inline EncodedValue RawBool(uint8_t byte) {  // any byte, for malformed files
  return Encode(ValueType::kBool, [&](ByteWriter& w) { w.U8(byte); });
}
inline EncodedValue Str(std::string_view v) {
  return Encode(ValueType::kString, [&](ByteWriter& w) { w.Str(v); });
}
inline EncodedValue StrArray(const std::vector<std::string>& items) {
  return Encode(ValueType::kArray, [&](ByteWriter& w) {
    w.U32(static_cast<uint32_t>(ValueType::kString));
    w.U64(items.size());
    for (const std::string& s : items) w.Str(s);
  });
}
// Array of a fixed-size element type; each element is written with `write_element`.
template <typename T, typename WriteElement>
EncodedValue Array(ValueType element_type, const std::vector<T>& items, WriteElement write) {
  return Encode(ValueType::kArray, [&](ByteWriter& w) {
    w.U32(static_cast<uint32_t>(element_type));
    w.U64(items.size());
    for (const T& item : items) write(w, item);
  });
}
inline EncodedValue I32Array(const std::vector<int32_t>& items) {
  return Array(ValueType::kInt32, items,
               [](ByteWriter& w, int32_t v) { w.U32(static_cast<uint32_t>(v)); });
}
inline EncodedValue U32Array(const std::vector<uint32_t>& items) {
  return Array(ValueType::kUint32, items, [](ByteWriter& w, uint32_t v) { w.U32(v); });
}
inline EncodedValue F32Array(const std::vector<float>& items) {
  return Array(ValueType::kFloat32, items, [](ByteWriter& w, float v) { w.F32(v); });
}
// Any type id and payload bytes, for malformed files.
inline EncodedValue Raw(uint32_t type, std::vector<uint8_t> payload) {
  return {type, std::move(payload)};
}

}  // namespace val

struct TestTensor {
  std::string name;
  std::vector<uint64_t> ne;            // as written; any count, any values
  uint32_t type = 0;                   // GgmlType id (0 = F32)
  std::optional<uint64_t> offset;      // default: next aligned offset after the previous
  std::optional<uint64_t> data_bytes;  // default: the size implied by ne and type

  TestTensor WithOffset(uint64_t value) const {
    TestTensor t = *this;
    t.offset = value;
    return t;
  }
  TestTensor WithDataBytes(uint64_t value) const {
    TestTensor t = *this;
    t.data_bytes = value;
    return t;
  }
};

inline TestTensor Tensor(std::string name, std::vector<uint64_t> ne, uint32_t type = 0) {
  TestTensor t;
  t.name = std::move(name);
  t.ne = std::move(ne);
  t.type = type;
  return t;
}

// Bytes implied by shape and type, or 0 when the shape/type is invalid or implausibly large for
// a test (malformed files then carry no data unless data_bytes says otherwise).
inline uint64_t ImpliedTensorBytes(const TestTensor& t) {
  const std::optional<TypeTraits> traits = FindTypeTraits(t.type);
  if (!traits || t.ne.empty()) return 0;
  uint64_t elements = 1;
  for (uint64_t d : t.ne) {
    if (d == 0 || d > (uint64_t{1} << 24) || elements > (uint64_t{1} << 24)) return 0;
    elements *= d;
  }
  if (elements > (uint64_t{1} << 24) || t.ne[0] % traits->block_size != 0) return 0;
  return elements / traits->block_size * traits->block_bytes;
}

class GgufWriter {
 public:
  GgufWriter& Version(uint32_t version) {
    version_ = version;
    return *this;
  }
  GgufWriter& Add(std::string key, EncodedValue value) {
    kv_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  GgufWriter& AddTensor(TestTensor tensor) {
    tensors_.push_back(std::move(tensor));
    return *this;
  }
  // Alignment used to place the data section and default offsets. It does not add the
  // general.alignment key; add that with Add() when wanted.
  GgufWriter& LayoutAlignment(uint64_t alignment) {
    alignment_ = alignment;
    return *this;
  }
  GgufWriter& TensorCountOverride(uint64_t n) {
    n_tensors_override_ = n;
    return *this;
  }
  GgufWriter& KvCountOverride(uint64_t n) {
    n_kv_override_ = n;
    return *this;
  }

  // The byte a tensor's data holds at position i (data is filled with this pattern).
  static uint8_t DataPattern(size_t tensor_index, uint64_t i) {
    return static_cast<uint8_t>(tensor_index * 31 + i * 7 + 1);
  }

  std::vector<uint8_t> Build() const {
    ByteWriter w;
    w.Raw({'G', 'G', 'U', 'F'});
    w.U32(version_);
    w.U64(n_tensors_override_.value_or(tensors_.size()));
    w.U64(n_kv_override_.value_or(kv_.size()));
    for (const auto& [key, value] : kv_) {
      w.Str(key);
      w.U32(value.type);
      w.Raw(value.payload);
    }
    std::vector<uint64_t> offsets;
    uint64_t next_offset = 0;
    for (const TestTensor& t : tensors_) {
      const uint64_t offset = t.offset.value_or(next_offset);
      offsets.push_back(offset);
      const uint64_t bytes = t.data_bytes.value_or(ImpliedTensorBytes(t));
      next_offset = (offset + bytes + alignment_ - 1) / alignment_ * alignment_;
      w.Str(t.name);
      w.U32(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) w.U64(d);
      w.U32(t.type);
      w.U64(offset);
    }
    if (tensors_.empty()) return std::move(w.bytes());
    w.PadTo(alignment_);
    std::vector<uint8_t>& out = w.bytes();
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const uint64_t bytes = tensors_[i].data_bytes.value_or(ImpliedTensorBytes(tensors_[i]));
      if (bytes == 0 || offsets[i] > (uint64_t{1} << 28)) continue;  // nothing sane to write
      const size_t end = data_start + offsets[i] + bytes;
      if (out.size() < end) out.resize(end, 0);
      for (uint64_t b = 0; b < bytes; ++b) out[data_start + offsets[i] + b] = DataPattern(i, b);
    }
    return std::move(out);
  }

 private:
  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  std::optional<uint64_t> n_tensors_override_;
  std::optional<uint64_t> n_kv_override_;
  std::vector<std::pair<std::string, EncodedValue>> kv_;
  std::vector<TestTensor> tensors_;
};

}  // namespace qevict::gguf::testing
