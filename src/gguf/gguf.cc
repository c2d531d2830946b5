#include "gguf/gguf.h"

#include <cstring>
#include <utility>

#include "gguf/gguf_parse.h"
#include "util/error.h"

namespace qevict::gguf {

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return "uint8";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUint16:
      return "uint16";
    case ValueType::kInt16:
      return "int16";
    case ValueType::kUint32:
      return "uint32";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "uint64";
    case ValueType::kInt64:
      return "int64";
    case ValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

namespace internal {

Header ParseHeader(ByteReader& reader) {
  const size_t size = reader.size();
  if (size == 0) throw Error("file is empty (0 bytes), not a GGUF file");
  if (size < 4) {
    throw Error("file is too small to be GGUF (" + std::to_string(size) + " bytes)");
  }
  const uint8_t* magic = reader.Take(4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    throw Error("bad magic '" +
                Printable(std::string_view(reinterpret_cast<const char*>(magic), 4)) +
                "' at byte offset 0: not a GGUF file (expected 'GGUF')");
  }
  if (size < kHeaderBytes) {
    throw Error("truncated GGUF header: the file has " + std::to_string(size) +
                " bytes, the header needs " + std::to_string(kHeaderBytes));
  }
  Header header;
  header.version = reader.U32("version");
  const uint32_t swapped_version = header.version >> 24;
  if ((header.version & 0x00ffffffu) == 0 && swapped_version >= 1 && swapped_version <= 3) {
    throw Error(
        "big-endian GGUF files are not supported (the version field reads as a "
        "byte-swapped " +
        std::to_string(swapped_version) + ")");
  }
  if (header.version == 1) {
    throw Error(
        "GGUF version 1 is not supported (only versions 2 and 3); convert the model "
        "again with a current converter");
  }
  if (header.version != 2 && header.version != 3) {
    throw Error("unsupported GGUF version " + std::to_string(header.version) +
                " (only versions 2 and 3 are supported)");
  }
  header.n_tensors = reader.U64("tensor count");
  header.n_kv = reader.U64("metadata entry count");

  // Bound both counts by the bytes present before anything is allocated or looped over.
  const uint64_t left = reader.remaining();
  if (header.n_kv > left / kMinMetadataEntryBytes) {
    throw Error("GGUF header claims n_kv = " + std::to_string(header.n_kv) +
                " metadata entries, but the " + std::to_string(left) +
                " bytes after the header can hold at most " +
                std::to_string(left / kMinMetadataEntryBytes));
  }
  const uint64_t left_for_tensors = left - header.n_kv * kMinMetadataEntryBytes;
  if (header.n_tensors > left_for_tensors / kMinTensorInfoBytes) {
    throw Error("GGUF header claims n_tensors = " + std::to_string(header.n_tensors) +
                " tensors, but the " + std::to_string(left) +
                " bytes after the header can hold at most " +
                std::to_string(left_for_tensors / kMinTensorInfoBytes) + " with " +
                std::to_string(header.n_kv) + " metadata entries");
  }
  return header;
}

}  // namespace internal

std::unique_ptr<File> File::Open(const std::string& path) {
  auto map = std::make_unique<MappedFile>(path);  // throws with the path and the reason
  std::unique_ptr<File> file(new File());
  file->bytes_ = map->bytes();
  file->map_ = std::move(map);
  try {
    file->ParseAll();
  } catch (const Error& e) {
    throw Error("'" + path + "': " + e.what() +
                "; if it should be a model, re-download it (scripts/fetch_model.sh checks the "
                "reference models) or re-convert it with llama.cpp's convert_hf_to_gguf.py");
  }
  return file;
}

std::unique_ptr<File> File::Parse(std::span<const uint8_t> bytes) {
  std::unique_ptr<File> file(new File());
  file->bytes_ = bytes;
  file->ParseAll();
  return file;
}

void File::ParseAll() {
  internal::ByteReader reader(bytes_);
  const internal::Header header = internal::ParseHeader(reader);
  version_ = header.version;
  internal::ParseMetadata(reader, header.n_kv, kv_, kv_index_);
  alignment_ = internal::AlignmentFromMetadata(Find("general.alignment"));
  internal::TensorTable table = internal::ParseTensorInfos(reader, header.n_tensors, alignment_);
  tensors_ = std::move(table.tensors);
  tensor_index_ = std::move(table.index);
  data_offset_ = table.data_offset;
}

const Value* File::Find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].value;
}

const TensorInfo* File::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace qevict::gguf
