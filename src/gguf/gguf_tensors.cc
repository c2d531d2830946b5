// Tensor info section and the layout of the data section that follows it.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_parse.h"
#include "util/error.h"

namespace qevict::gguf::internal {
namespace {

std::string ShapeString(const TensorInfo& t) {
  std::string out = "[";
  for (int d = 0; d < t.n_dims; ++d) {
    if (d > 0) out += ", ";
    out += std::to_string(t.ne[d]);
  }
  return out + "]";
}

std::string_view ReadTensorName(ByteReader& reader) {
  const std::string_view name = reader.String("tensor name", kMaxTensorNameBytes);
  if (name.empty()) throw Error("empty tensor name");
  return name;
}

// Dimensions, element count and byte size; all products are checked for overflow.
void ReadShapeAndType(ByteReader& reader, TensorInfo& t) {
  const uint32_t n_dims = reader.U32("tensor n_dims");
  if (n_dims < 1 || n_dims > static_cast<uint32_t>(kMaxDims)) {
    throw Error("n_dims is " + std::to_string(n_dims) + "; it must be 1 to " +
                std::to_string(kMaxDims));
  }
  t.n_dims = static_cast<int>(n_dims);
  std::fill(std::begin(t.ne), std::end(t.ne), int64_t{1});
  int64_t n_elements = 1;
  for (int d = 0; d < t.n_dims; ++d) {
    const uint64_t dim = reader.U64("tensor dimension");
    if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Error("dimension " + std::to_string(d) + " is " +
                  std::to_string(static_cast<int64_t>(dim)) + "; every dimension must be >= 1");
    }
    t.ne[d] = static_cast<int64_t>(dim);
    if (n_elements > std::numeric_limits<int64_t>::max() / t.ne[d]) {
      throw Error("element count overflows int64 (dimension " + std::to_string(d) + " is " +
                  std::to_string(dim) + ")");
    }
    n_elements *= t.ne[d];
  }

  const size_t type_offset = reader.offset();
  const uint32_t type_id = reader.U32("tensor type");
  const std::optional<TypeTraits> traits = FindTypeTraits(type_id);
  if (!traits) {
    throw Error("unknown or unsupported tensor type id " + std::to_string(type_id) +
                " at byte offset " + std::to_string(type_offset));
  }
  t.type = traits->type;
  if (t.ne[0] % traits->block_size != 0) {
    throw Error("row length " + std::to_string(t.ne[0]) + " of shape " + ShapeString(t) +
                " is not a multiple of the " + traits->name + " block size " +
                std::to_string(traits->block_size));
  }
  const uint64_t blocks_per_row = static_cast<uint64_t>(t.ne[0] / traits->block_size);
  const uint64_t n_rows = static_cast<uint64_t>(t.n_rows());  // <= n_elements, no overflow
  constexpr uint64_t kMaxBytes = std::numeric_limits<size_t>::max();
  if (blocks_per_row > kMaxBytes / traits->block_bytes ||
      blocks_per_row * traits->block_bytes > kMaxBytes / n_rows) {
    throw Error("byte size of shape " + ShapeString(t) + " of type " + traits->name + " overflows");
  }
  t.n_bytes = static_cast<size_t>(blocks_per_row * traits->block_bytes * n_rows);
}

// The rest of a tensor info after its name.
TensorInfo ReadTensorInfo(ByteReader& reader, std::string_view name, uint64_t alignment) {
  TensorInfo t{};
  t.name = name;
  ReadShapeAndType(reader, t);
  t.offset = reader.U64("tensor offset");
  if (t.offset % alignment != 0) {
    throw Error("data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                std::to_string(alignment));
  }
  return t;
}

// Every tensor inside the data section, no two overlapping. Offsets are relative to data_offset.
// Sets each tensor's data pointer.
void CheckDataLayout(std::vector<TensorInfo>& tensors, uint64_t data_offset,
                     std::span<const uint8_t> bytes) {
  if (tensors.empty()) return;
  const size_t file_size = bytes.size();
  if (data_offset > file_size) {
    throw Error("the tensor data section starts at byte offset " + std::to_string(data_offset) +
                ", past the end of the file (size " + std::to_string(file_size) + ")");
  }
  const uint64_t data_size = file_size - data_offset;
  for (TensorInfo& t : tensors) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      throw Error("tensor '" + Printable(t.name) + "' data (offset " + std::to_string(t.offset) +
                  ", " + std::to_string(t.n_bytes) + " bytes) extends past the end of the file:" +
                  " the data section at byte offset " + std::to_string(data_offset) + " holds " +
                  std::to_string(data_size) + " bytes");
    }
    t.data = bytes.data() + data_offset + t.offset;
  }
  std::vector<size_t> by_offset(tensors.size());
  std::iota(by_offset.begin(), by_offset.end(), size_t{0});
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = tensors[by_offset[i - 1]];
    const TensorInfo& next = tensors[by_offset[i]];
    if (prev.offset + prev.n_bytes > next.offset) {  // both in bounds: no overflow
      throw Error("tensors '" + Printable(prev.name) + "' (data offsets " +
                  std::to_string(prev.offset) + " to " +
                  std::to_string(prev.offset + prev.n_bytes) + ") and '" + Printable(next.name) +
                  "' (starting at " + std::to_string(next.offset) + ") overlap");
    }
  }
}

}  // namespace

TensorTable ParseTensorInfos(ByteReader& reader, uint64_t n_tensors, uint64_t alignment) {
  TensorTable table;
  // Reserve for a plausible count only: memory grows with the tensor infos actually present.
  const size_t expected = static_cast<size_t>(std::min<uint64_t>(n_tensors, kReserveLimit));
  table.tensors.reserve(expected);
  table.index.reserve(expected);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t info_offset = reader.offset();
    const auto where = [&](std::string_view name) {
      std::string out = "tensor #" + std::to_string(i);
      if (!name.empty()) out += " '" + Printable(name) + "'";
      return out + " (tensor info at byte offset " + std::to_string(info_offset) + "): ";
    };
    std::string_view name;
    try {
      name = ReadTensorName(reader);
    } catch (const Error& e) {
      throw Error(where({}) + e.what());
    }
    try {
      const TensorInfo t = ReadTensorInfo(reader, name, alignment);
      const auto [it, inserted] = table.index.emplace(t.name, table.tensors.size());
      if (!inserted) {
        throw Error("duplicate tensor name (first used by tensor #" + std::to_string(it->second) +
                    ")");
      }
      table.tensors.push_back(t);
    } catch (const Error& e) {
      throw Error(where(name) + e.what());
    }
  }
  const uint64_t end_of_infos = reader.offset();
  table.data_offset = (end_of_infos + alignment - 1) / alignment * alignment;
  CheckDataLayout(table.tensors, table.data_offset, reader.bytes());
  return table;
}

}  // namespace qevict::gguf::internal
