// Malformed files built in memory: each class of docs/security.md (GGUF part) is rejected with
// an Error naming the problem; truncations and byte mutations of a valid file never crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_test_writer.h"
#include "util/error.h"

namespace qevict::gguf {
namespace {

using testing::ByteWriter;
using testing::GgufWriter;
using testing::Tensor;
using testing::TestTensor;
namespace val = testing::val;

constexpr uint32_t kQ4_0 = static_cast<uint32_t>(GgmlType::kQ4_0);

std::string ParseError(const std::vector<uint8_t>& bytes) {
  try {
    File::Parse(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "<parsed without error>";
}

#define EXPECT_PARSE_ERROR(bytes, substring) \
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, substring, ParseError(bytes))

std::vector<uint8_t> Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  ByteWriter w;
  w.Raw({'G', 'G', 'U', 'F'});
  w.U32(version);
  w.U64(n_tensors);
  w.U64(n_kv);
  return std::move(w.bytes());
}

TEST(GgufMalformedTest, HeaderClass) {
  EXPECT_PARSE_ERROR({}, "file is empty");
  EXPECT_PARSE_ERROR((std::vector<uint8_t>{'G', 'G'}), "too small");
  std::vector<uint8_t> bad_magic = GgufWriter().Build();
  bad_magic[0] = 'X';
  EXPECT_PARSE_ERROR(bad_magic, "bad magic 'XGUF'");
  EXPECT_PARSE_ERROR((std::vector<uint8_t>{'G', 'G', 'U', 'F', 3, 0, 0, 0, 0}),
                     "truncated GGUF header");
  EXPECT_PARSE_ERROR(Header(1, 0, 0), "GGUF version 1");
  EXPECT_PARSE_ERROR(Header(4, 0, 0), "unsupported GGUF version 4");
  EXPECT_PARSE_ERROR(Header(0, 0, 0), "unsupported GGUF version 0");
  EXPECT_PARSE_ERROR(Header(0x03000000u, 0, 0), "big-endian GGUF files are not supported");
  EXPECT_PARSE_ERROR(Header(0x02000000u, 0, 0), "big-endian GGUF files are not supported");
}

TEST(GgufMalformedTest, CountsBeyondTheFileFailBeforeAllocating) {
  std::vector<uint8_t> bytes = Header(3, uint64_t{1} << 60, 0);
  bytes.resize(100, 0);
  EXPECT_PARSE_ERROR(bytes, "n_tensors = 1152921504606846976");
  EXPECT_PARSE_ERROR(Header(3, 0, ~uint64_t{0}), "n_kv = 18446744073709551615");
  EXPECT_PARSE_ERROR(Header(3, ~uint64_t{0}, ~uint64_t{0}), "n_kv");
  // n_kv fits on its own, but not together with the tensors.
  std::vector<uint8_t> both = Header(3, 2, 2);
  both.resize(24 + 2 * 13 + 32, 0);
  EXPECT_PARSE_ERROR(both, "n_tensors = 2");
  // A count that fits the bound but whose entries are not there.
  EXPECT_PARSE_ERROR(
      GgufWriter().Add("a", val::Str(std::string(40, 'x'))).KvCountOverride(2).Build(),
      "metadata entry #1");
}

TEST(GgufMalformedTest, StringAndArrayLengths) {
  ByteWriter huge_string;
  huge_string.U64(1000000);
  huge_string.Raw({'a', 'b'});
  EXPECT_PARSE_ERROR(GgufWriter().Add("s", val::Raw(8, huge_string.bytes())).Build(),
                     "string length 1000000");
  ByteWriter huge_key;
  huge_key.U64(~uint64_t{0});
  std::vector<uint8_t> key_bytes = Header(3, 0, 1);
  key_bytes.insert(key_bytes.end(), huge_key.bytes().begin(), huge_key.bytes().end());
  key_bytes.resize(key_bytes.size() + 16, 'k');
  EXPECT_PARSE_ERROR(key_bytes, "over the limit of 65535");

  for (uint32_t element_type : {0u, 4u, 10u, 8u}) {
    ByteWriter array;
    array.U32(element_type);
    array.U64(uint64_t{1} << 62);  // times 4 or 8 overflows 64 bits
    array.U64(0);
    EXPECT_PARSE_ERROR(GgufWriter().Add("a", val::Raw(9, array.bytes())).Build(),
                       "cannot fit in the")
        << "element type " << element_type;
  }
  ByteWriter strings;  // a string array whose third string runs past the end
  strings.U32(8);
  strings.U64(3);
  strings.Str("one");
  strings.Str("two");
  strings.U64(50);
  strings.Raw({'x'});
  EXPECT_PARSE_ERROR(GgufWriter().Add("a", val::Raw(9, strings.bytes())).Build(),
                     "string array element: string length 50");
}

TEST(GgufMalformedTest, ValueTypesAndKeys) {
  EXPECT_PARSE_ERROR(GgufWriter().Add("x", val::Raw(13, {0, 0, 0, 0})).Build(),
                     "unknown value type 13");
  EXPECT_PARSE_ERROR(GgufWriter().Add("x", val::Raw(0x80000000u, {0})).Build(),
                     "unknown value type 2147483648");
  ByteWriter nested;
  nested.U32(9);
  nested.U64(1);
  nested.U32(4);
  nested.U64(0);
  EXPECT_PARSE_ERROR(GgufWriter().Add("x", val::Raw(9, nested.bytes())).Build(),
                     "nested arrays are not supported");
  ByteWriter unknown_elements;
  unknown_elements.U32(77);
  unknown_elements.U64(0);
  EXPECT_PARSE_ERROR(GgufWriter().Add("x", val::Raw(9, unknown_elements.bytes())).Build(),
                     "unknown array element type 77");
  EXPECT_PARSE_ERROR(GgufWriter().Add("flag", val::RawBool(2)).Build(),
                     "bool value 2 at byte offset");
  ByteWriter bools;
  bools.U32(7);
  bools.U64(3);
  bools.Raw({0, 1, 255});
  EXPECT_PARSE_ERROR(GgufWriter().Add("flags", val::Raw(9, bools.bytes())).Build(),
                     "bool value 255");
  EXPECT_PARSE_ERROR(GgufWriter().Add("", val::U8(1)).Build(), "empty key");
  EXPECT_PARSE_ERROR(GgufWriter().Add("a\nb", val::U8(1)).Build(),
                     "key 'a\\x0ab' contains bytes that are not printable ASCII");
  EXPECT_PARSE_ERROR(
      GgufWriter().Add("k", val::U8(1)).Add("j", val::U8(1)).Add("k", val::U8(2)).Build(),
      "metadata entry #2 (key 'k') at byte offset");
  EXPECT_PARSE_ERROR(GgufWriter().Add("k", val::U8(1)).Add("k", val::Str("x")).Build(),
                     "duplicate key (first defined by metadata entry #0)");
}

TEST(GgufMalformedTest, Alignment) {
  EXPECT_PARSE_ERROR(GgufWriter().Add("general.alignment", val::U32(0)).Build(),
                     "general.alignment is 0; it must be a non-zero power of two");
  EXPECT_PARSE_ERROR(GgufWriter().Add("general.alignment", val::U32(48)).Build(),
                     "general.alignment is 48");
  EXPECT_PARSE_ERROR(GgufWriter().Add("general.alignment", val::U32(1u << 31)).Build(),
                     "over the limit of 1048576");
  EXPECT_PARSE_ERROR(GgufWriter().Add("general.alignment", val::U64(32)).Build(),
                     "metadata key 'general.alignment' has type uint64, expected uint32");
  EXPECT_PARSE_ERROR(GgufWriter().Add("general.alignment", val::Str("32")).Build(),
                     "has type string, expected uint32");
  // The largest allowed alignment, and 1, are fine.
  EXPECT_NO_THROW(File::Parse(GgufWriter().Add("general.alignment", val::U32(1u << 20)).Build()));
  EXPECT_NO_THROW(File::Parse(GgufWriter().Add("general.alignment", val::U32(1)).Build()));
}

std::vector<uint8_t> OneTensor(TestTensor t) {
  return GgufWriter().AddTensor(std::move(t)).Build();
}

TEST(GgufMalformedTest, TensorInfos) {
  EXPECT_PARSE_ERROR(OneTensor(Tensor(std::string(64, 'n'), {4})),
                     "tensor name at byte offset 24 has length 64, over the limit of 63");
  EXPECT_NO_THROW(File::Parse(OneTensor(Tensor(std::string(63, 'n'), {4}))));
  EXPECT_PARSE_ERROR(OneTensor(Tensor("", {4})), "empty tensor name");
  EXPECT_PARSE_ERROR(GgufWriter().AddTensor(Tensor("w", {4})).AddTensor(Tensor("w", {4})).Build(),
                     "tensor #1 'w' (tensor info at byte offset");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {1, 1, 1, 1, 1})), "n_dims is 5");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {})), "n_dims is 0");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {4, 0})), "dimension 1 is 0");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {~uint64_t{0}})), "dimension 0 is -1");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {uint64_t{1} << 32, uint64_t{1} << 31})),
                     "element count overflows int64");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {uint64_t{1} << 62})),
                     "byte size of shape [4611686018427387904] of type F32 overflows");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {4}, 4)), "unknown or unsupported tensor type id 4");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {4}, 0xffffffffu)), "tensor type id 4294967295");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {33, 2}, kQ4_0)),
                     "row length 33 of shape [33, 2] is not a multiple of the Q4_0 block size 32");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {4}).WithOffset(16)),
                     "data offset 16 is not a multiple of the alignment 32");
}

TEST(GgufMalformedTest, DataLayout) {
  EXPECT_PARSE_ERROR(
      GgufWriter().AddTensor(Tensor("a", {16})).AddTensor(Tensor("b", {16}).WithOffset(32)).Build(),
      "tensors 'a' (data offsets 0 to 64) and 'b' (starting at 32) overlap");
  EXPECT_PARSE_ERROR(GgufWriter()
                         .AddTensor(Tensor("a", {16}))
                         .AddTensor(Tensor("same", {4}).WithOffset(0))
                         .Build(),
                     "overlap");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {16}).WithDataBytes(60)),
                     "tensor 'w' data (offset 0, 64 bytes) extends past the end of the file");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {16}).WithOffset(uint64_t{1} << 62)),
                     "extends past the end of the file");
  EXPECT_PARSE_ERROR(OneTensor(Tensor("w", {16}).WithOffset(~uint64_t{0} - 31).WithDataBytes(0)),
                     "extends past the end of the file");
  // The data section itself starts past the end: tensor infos end mid-alignment.
  std::vector<uint8_t> cut = OneTensor(Tensor("w", {1}).WithDataBytes(0));
  while (cut.size() % 32 == 0) cut.pop_back();
  EXPECT_PARSE_ERROR(cut, "past the end of the file");
}

// A file exercising every section: all value types, arrays, several tensors.
std::vector<uint8_t> RichFile() {
  GgufWriter w;
  w.Add("general.architecture", val::Str("llama"))
      .Add("general.alignment", val::U32(64))
      .Add("u8", val::U8(1))
      .Add("i64", val::I64(-1))
      .Add("f64", val::F64(0.5))
      .Add("b", val::Bool(true))
      .Add("tokens", val::StrArray({"a", "bc", "def"}))
      .Add("types", val::I32Array({1, 2, 3}))
      .Add("scores", val::F32Array({0.5f, 0.25f}))
      .LayoutAlignment(64)
      .AddTensor(Tensor("w1", {32, 2}, kQ4_0))
      .AddTensor(Tensor("w2", {3, 2}))
      .AddTensor(Tensor("w3", {2, 1, 1, 2}, 1));
  return w.Build();
}

TEST(GgufMalformedTest, EveryTruncationFailsCleanly) {
  const std::vector<uint8_t> full = RichFile();
  ASSERT_NO_THROW(File::Parse(full));
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + n);
    EXPECT_THROW(File::Parse(prefix), Error) << "prefix of " << n << " bytes";
  }
}

TEST(GgufMalformedTest, ByteMutationsNeverCrash) {
  const std::vector<uint8_t> full = RichFile();
  std::vector<uint8_t> mutated = full;
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t replacement : {uint8_t{0}, uint8_t{1}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xff},
                                static_cast<uint8_t>(full[i] ^ 0x01)}) {
      mutated[i] = replacement;
      try {
        const auto file = File::Parse(mutated);
        // Whatever parses must be self-consistent.
        for (const TensorInfo& t : file->tensors()) {
          ASSERT_GE(t.data, mutated.data());
          ASSERT_LE(t.data + t.n_bytes, mutated.data() + mutated.size());
        }
        for (const KeyValue& kv : file->metadata()) {
          if (kv.value.type == ValueType::kArray && kv.value.array_type == ValueType::kString) {
            file->GetStringArray(kv.key);
          }
        }
      } catch (const Error&) {
      }
    }
    mutated[i] = full[i];
  }
}

}  // namespace
}  // namespace qevict::gguf
