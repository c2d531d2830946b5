// Round trips of well-formed files built in memory: every value type, both versions, alignment,
// tensors, zero-copy views and the typed getters.
#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gguf/gguf_test_writer.h"
#include "util/error.h"

namespace qevict::gguf {
namespace {

using testing::GgufWriter;
using testing::Tensor;
using testing::TestTensor;
namespace val = testing::val;

bool PointsInto(const void* p, const std::vector<uint8_t>& bytes) {
  const auto* q = static_cast<const uint8_t*>(p);
  return q >= bytes.data() && q < bytes.data() + bytes.size();
}

// Runs `fn` and returns the qevict::Error message it throws ("" if it does not throw).
template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

GgufWriter AllScalarTypes(uint32_t version) {
  GgufWriter w;
  w.Version(version)
      .Add("t.u8", val::U8(250))
      .Add("t.i8", val::I8(-100))
      .Add("t.u16", val::U16(65000))
      .Add("t.i16", val::I16(-32000))
      .Add("t.u32", val::U32(4000000000u))
      .Add("t.i32", val::I32(-2000000000))
      .Add("t.u64", val::U64(uint64_t{1} << 62))
      .Add("t.i64", val::I64(-(int64_t{1} << 62)))
      .Add("t.f32", val::F32(1.5f))
      .Add("t.f64", val::F64(-2.25e-300))
      .Add("t.bool_true", val::Bool(true))
      .Add("t.bool_false", val::Bool(false))
      .Add("t.string", val::Str("hello, gguf"))
      .Add("t.empty_string", val::Str(""));
  return w;
}

class VersionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(VersionTest, AllScalarTypesRoundTrip) {
  const std::vector<uint8_t> bytes = AllScalarTypes(GetParam()).Build();
  const auto file = File::Parse(bytes);
  EXPECT_EQ(file->version(), GetParam());
  EXPECT_EQ(file->metadata().size(), 14u);
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->GetInt("t.u8"), 250);
  EXPECT_EQ(file->GetInt("t.i8"), -100);
  EXPECT_EQ(file->GetInt("t.u16"), 65000);
  EXPECT_EQ(file->GetInt("t.i16"), -32000);
  EXPECT_EQ(file->GetInt("t.u32"), 4000000000LL);
  EXPECT_EQ(file->GetInt("t.i32"), -2000000000);
  EXPECT_EQ(file->GetInt("t.u64"), int64_t{1} << 62);
  EXPECT_EQ(file->GetInt("t.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(file->GetFloat("t.f32"), 1.5);
  EXPECT_EQ(file->GetFloat("t.f64"), -2.25e-300);
  EXPECT_TRUE(file->GetBool("t.bool_true"));
  EXPECT_FALSE(file->GetBool("t.bool_false"));
  EXPECT_EQ(file->GetString("t.string"), "hello, gguf");
  EXPECT_EQ(file->GetString("t.empty_string"), "");
  // Stored types are preserved.
  EXPECT_EQ(file->Find("t.u8")->type, ValueType::kUint8);
  EXPECT_EQ(file->Find("t.i16")->type, ValueType::kInt16);
  EXPECT_EQ(file->Find("t.f32")->type, ValueType::kFloat32);
  // Metadata keeps file order.
  EXPECT_EQ(file->metadata().front().key, "t.u8");
  EXPECT_EQ(file->metadata().back().key, "t.empty_string");
}

TEST_P(VersionTest, ArraysOfEveryElementTypeRoundTrip) {
  GgufWriter w;
  w.Version(GetParam())
      .Add("a.u8", val::Array(ValueType::kUint8, std::vector<uint8_t>{1, 2, 255},
                              [](testing::ByteWriter& b, uint8_t v) { b.U8(v); }))
      .Add("a.i16",
           val::Array(ValueType::kInt16, std::vector<int16_t>{-1, 7},
                      [](testing::ByteWriter& b, int16_t v) { b.U16(static_cast<uint16_t>(v)); }))
      .Add("a.u64", val::Array(ValueType::kUint64, std::vector<uint64_t>{1, ~uint64_t{0}},
                               [](testing::ByteWriter& b, uint64_t v) { b.U64(v); }))
      .Add("a.f64", val::Array(ValueType::kFloat64, std::vector<double>{0.5},
                               [](testing::ByteWriter& b, double v) { b.F64(v); }))
      .Add("a.bool", val::Array(ValueType::kBool, std::vector<uint8_t>{0, 1, 1},
                                [](testing::ByteWriter& b, uint8_t v) { b.U8(v); }))
      .Add("a.i32", val::I32Array({-5, 0, 2147483647}))
      .Add("a.u32", val::U32Array({1, 2}))
      .Add("a.f32", val::F32Array({0.25f, -1.0f, 3.0e38f}))
      .Add("a.str", val::StrArray({"alpha", "", "\xc4\xa0the"}))
      .Add("a.empty", val::I32Array({}));
  const std::vector<uint8_t> bytes = w.Build();
  const auto file = File::Parse(bytes);

  const Value* u8 = file->Find("a.u8");
  ASSERT_NE(u8, nullptr);
  EXPECT_EQ(u8->type, ValueType::kArray);
  EXPECT_EQ(u8->array_type, ValueType::kUint8);
  EXPECT_EQ(u8->array_size, 3u);
  EXPECT_EQ(u8->array_data[2], 255);
  EXPECT_EQ(file->Find("a.i16")->array_size, 2u);
  EXPECT_EQ(file->Find("a.u64")->array_type, ValueType::kUint64);
  EXPECT_EQ(file->Find("a.f64")->array_type, ValueType::kFloat64);
  EXPECT_EQ(file->Find("a.bool")->array_type, ValueType::kBool);

  EXPECT_EQ(file->GetInt32Array("a.i32"), (std::vector<int32_t>{-5, 0, 2147483647}));
  EXPECT_EQ(file->GetFloatArray("a.f32"), (std::vector<float>{0.25f, -1.0f, 3.0e38f}));
  const std::vector<std::string_view> strings = file->GetStringArray("a.str");
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings[0], "alpha");
  EXPECT_EQ(strings[1], "");
  EXPECT_EQ(strings[2], "\xc4\xa0the");
  EXPECT_TRUE(file->GetInt32Array("a.empty").empty());
}

INSTANTIATE_TEST_SUITE_P(V2AndV3, VersionTest, ::testing::Values(2u, 3u));

TEST(GgufTest, StringsAndArraysAreViewsIntoTheBytes) {
  std::vector<std::string> vocab;
  for (int i = 0; i < 1000; ++i) vocab.push_back("token" + std::to_string(i));
  GgufWriter w;
  w.Add("name", val::Str("model")).Add("tokenizer.ggml.tokens", val::StrArray(vocab));
  const std::vector<uint8_t> bytes = w.Build();
  const auto file = File::Parse(bytes);
  EXPECT_TRUE(PointsInto(file->GetString("name").data(), bytes));
  EXPECT_TRUE(PointsInto(file->metadata()[0].key.data(), bytes));
  EXPECT_TRUE(PointsInto(file->Find("tokenizer.ggml.tokens")->array_data, bytes));
  const std::vector<std::string_view> tokens = file->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), vocab.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(tokens[i], vocab[i]);
    EXPECT_TRUE(PointsInto(tokens[i].data(), bytes));
  }
}

TEST(GgufTest, EmptyFileWithHeaderOnly) {
  const std::vector<uint8_t> bytes = GgufWriter().Build();
  EXPECT_EQ(bytes.size(), 24u);
  const auto file = File::Parse(bytes);
  EXPECT_TRUE(file->metadata().empty());
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_EQ(file->file_size(), 24u);
}

TEST(GgufTest, TensorsDefaultAlignment) {
  GgufWriter w;
  w.Add("general.architecture", val::Str("llama"))
      .AddTensor(Tensor("a", {3}, 0))
      .AddTensor(Tensor("q", {64, 3}, static_cast<uint32_t>(GgmlType::kQ4_1)))
      .AddTensor(Tensor("h", {2, 3, 4, 5}, static_cast<uint32_t>(GgmlType::kF16)));
  const std::vector<uint8_t> bytes = w.Build();
  const auto file = File::Parse(bytes);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->data_offset() % 32, 0u);
  ASSERT_EQ(file->tensors().size(), 3u);

  const TensorInfo* a = file->FindTensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, GgmlType::kF32);
  EXPECT_EQ(a->n_dims, 1);
  EXPECT_EQ(a->ne[0], 3);
  EXPECT_EQ(a->ne[1], 1);
  EXPECT_EQ(a->ne[3], 1);
  EXPECT_EQ(a->n_bytes, 12u);
  EXPECT_EQ(a->offset, 0u);

  const TensorInfo* q = file->FindTensor("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::kQ4_1);
  EXPECT_EQ(q->n_rows(), 3);
  EXPECT_EQ(q->n_bytes, 3u * 2 * 20);
  EXPECT_EQ(q->offset, 32u);

  const TensorInfo* h = file->FindTensor("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->n_dims, 4);
  EXPECT_EQ(h->n_elements(), 120);
  EXPECT_EQ(h->n_bytes, 240u);
  EXPECT_EQ(file->FindTensor("missing"), nullptr);

  // Data pointers address the right bytes.
  for (size_t i = 0; i < file->tensors().size(); ++i) {
    const TensorInfo& t = file->tensors()[i];
    EXPECT_EQ(t.data, bytes.data() + file->data_offset() + t.offset);
    for (size_t b = 0; b < t.n_bytes; ++b) {
      ASSERT_EQ(t.data[b], GgufWriter::DataPattern(i, b)) << t.name << " byte " << b;
    }
  }
}

TEST(GgufTest, CustomAlignment) {
  GgufWriter w;
  w.LayoutAlignment(256)
      .Add("general.alignment", val::U32(256))
      .AddTensor(Tensor("x", {5}))
      .AddTensor(Tensor("y", {7}));
  const std::vector<uint8_t> bytes = w.Build();
  const auto file = File::Parse(bytes);
  EXPECT_EQ(file->alignment(), 256u);
  EXPECT_EQ(file->data_offset() % 256, 0u);
  EXPECT_EQ(file->FindTensor("y")->offset, 256u);
}

TEST(GgufTest, TensorsMayLeaveGapsAndAppearInAnyOrder) {
  GgufWriter w;
  w.AddTensor(Tensor("late", {4}).WithOffset(128)).AddTensor(Tensor("early", {4}).WithOffset(0));
  const std::vector<uint8_t> bytes = w.Build();
  const auto file = File::Parse(bytes);
  EXPECT_EQ(file->FindTensor("late")->offset, 128u);
  EXPECT_EQ(file->FindTensor("early")->offset, 0u);
}

// Every type id the quant module knows parses, weight-supported or not (the model loader is the
// one to refuse types it cannot compute with).
TEST(GgufTest, EveryKnownTensorTypeParses) {
  int known = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const std::optional<TypeTraits> traits = FindTypeTraits(id);
    if (!traits) continue;
    ++known;
    const uint64_t row = 2 * static_cast<uint64_t>(traits->block_size);
    const std::vector<uint8_t> bytes = GgufWriter().AddTensor(Tensor("t", {row, 3}, id)).Build();
    const auto file = File::Parse(bytes);
    EXPECT_EQ(file->FindTensor("t")->type, traits->type) << traits->name;
    EXPECT_EQ(file->FindTensor("t")->n_bytes, 2 * 3 * traits->block_bytes) << traits->name;
  }
  EXPECT_GE(known, 10);
}

TEST(GgufGettersTest, IntegerGetterAcceptsEveryIntegerTypeThatFits) {
  GgufWriter w;
  w.Add("big", val::U64(std::numeric_limits<uint64_t>::max()))
      .Add("max", val::U64(static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      .Add("min", val::I64(std::numeric_limits<int64_t>::min()));
  const std::vector<uint8_t> bytes = w.Build();
  const auto file = File::Parse(bytes);
  EXPECT_EQ(file->GetInt("max"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(file->GetInt("min"), std::numeric_limits<int64_t>::min());
  EXPECT_NE(ErrorOf([&] { file->GetInt("big"); }).find("does not fit in int64"), std::string::npos);
}

TEST(GgufGettersTest, TypeConfusionNamesKeyStoredAndExpectedType) {
  GgufWriter w;
  w.Add("llama.block_count", val::Str("30"))
      .Add("f", val::F32(1.0f))
      .Add("i", val::I32(3))
      .Add("b", val::Bool(true))
      .Add("u32s", val::U32Array({1, 2}))
      .Add("s", val::Str("x"));
  const std::vector<uint8_t> bytes = w.Build();
  const auto file = File::Parse(bytes);
  EXPECT_EQ(ErrorOf([&] { file->GetInt("llama.block_count"); }),
            "metadata key 'llama.block_count' has type string, expected an integer");
  EXPECT_EQ(ErrorOf([&] { file->FindInt("llama.block_count"); }),
            "metadata key 'llama.block_count' has type string, expected an integer");
  EXPECT_EQ(ErrorOf([&] { file->GetInt("f"); }),
            "metadata key 'f' has type float32, expected an integer");
  EXPECT_EQ(ErrorOf([&] { file->GetInt("b"); }),
            "metadata key 'b' has type bool, expected an integer");
  EXPECT_EQ(ErrorOf([&] { file->GetFloat("i"); }),
            "metadata key 'i' has type int32, expected a float (float32 or float64)");
  EXPECT_EQ(ErrorOf([&] { file->GetBool("i"); }),
            "metadata key 'i' has type int32, expected a bool");
  EXPECT_EQ(ErrorOf([&] { file->GetString("u32s"); }),
            "metadata key 'u32s' has type array of uint32, expected a string");
  EXPECT_EQ(ErrorOf([&] { file->GetInt32Array("u32s"); }),
            "metadata key 'u32s' has type array of uint32, expected array of int32");
  EXPECT_EQ(ErrorOf([&] { file->GetFloatArray("s"); }),
            "metadata key 's' has type string, expected array of float32");
  EXPECT_EQ(ErrorOf([&] { file->GetStringArray("i"); }),
            "metadata key 'i' has type int32, expected array of string");
}

TEST(GgufGettersTest, MissingKeys) {
  const std::vector<uint8_t> bytes = GgufWriter().Add("present", val::U8(1)).Build();
  const auto file = File::Parse(bytes);
  EXPECT_FALSE(file->Has("absent"));
  EXPECT_TRUE(file->Has("present"));
  EXPECT_EQ(file->Find("absent"), nullptr);
  EXPECT_FALSE(file->FindInt("absent").has_value());
  EXPECT_FALSE(file->FindFloat("absent").has_value());
  EXPECT_FALSE(file->FindBool("absent").has_value());
  EXPECT_FALSE(file->FindString("absent").has_value());
  EXPECT_EQ(file->FindInt("present"), 1);
  EXPECT_EQ(ErrorOf([&] { file->GetInt("absent"); }), "missing metadata key 'absent'");
  EXPECT_EQ(ErrorOf([&] { file->GetFloat("absent"); }), "missing metadata key 'absent'");
  EXPECT_EQ(ErrorOf([&] { file->GetBool("absent"); }), "missing metadata key 'absent'");
  EXPECT_EQ(ErrorOf([&] { file->GetString("absent"); }), "missing metadata key 'absent'");
  EXPECT_EQ(ErrorOf([&] { file->GetStringArray("absent"); }), "missing metadata key 'absent'");
  EXPECT_EQ(ErrorOf([&] { file->GetFloatArray("absent"); }), "missing metadata key 'absent'");
  EXPECT_EQ(ErrorOf([&] { file->GetInt32Array("absent"); }), "missing metadata key 'absent'");
}

TEST(GgufGettersTest, FloatSpecialValuesPassThrough) {
  GgufWriter w;
  w.Add("nan", val::F32(std::numeric_limits<float>::quiet_NaN()))
      .Add("inf", val::F64(std::numeric_limits<double>::infinity()));
  const std::vector<uint8_t> bytes = w.Build();
  const auto file = File::Parse(bytes);
  EXPECT_TRUE(std::isnan(file->GetFloat("nan")));
  EXPECT_TRUE(std::isinf(file->GetFloat("inf")));
}

TEST(GgufTest, ValueTypeNames) {
  const char* const kExpected[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                   "int32",  "float32", "bool",   "string", "array",
                                   "uint64", "int64",   "float64"};
  for (uint32_t id = 0; id < 13; ++id) {
    EXPECT_STREQ(ValueTypeName(static_cast<ValueType>(id)), kExpected[id]);
  }
  EXPECT_STREQ(ValueTypeName(static_cast<ValueType>(13)), "unknown");
}

}  // namespace
}  // namespace qevict::gguf
