// The real SmolLM2-135M model, when present under models/ (not committed): it parses, quickly,
// with the expected hyperparameters, vocabulary and tensor table.
#include "source_dir.h"
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "gguf/gguf.h"

namespace qevict::gguf {
namespace {

const std::string kModelPath = QEVICT_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(GgufModelTest, SmolLm2Parses) {
  if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " not present";
  const auto start = std::chrono::steady_clock::now();
  const auto file = File::Open(kModelPath);
  const double parse_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("parsed %zu bytes, %zu keys, %zu tensors in %.2f ms\n", file->file_size(),
              file->metadata().size(), file->tensors().size(), parse_ms);
  EXPECT_LT(parse_ms, 1000.0);  // milliseconds in practice; generous for a loaded machine

  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->GetString("general.architecture"), "llama");
  EXPECT_EQ(file->GetInt("llama.block_count"), 30);
  EXPECT_EQ(file->GetInt("llama.embedding_length"), 576);
  EXPECT_EQ(file->GetInt("llama.attention.head_count"), 9);
  EXPECT_EQ(file->GetInt("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(file->GetInt("llama.feed_forward_length"), 1536);
  EXPECT_DOUBLE_EQ(file->GetFloat("llama.rope.freq_base"), 100000.0);
  EXPECT_NEAR(file->GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(file->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file->GetString("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(file->GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(file->GetInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_FALSE(file->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(file->GetString("tokenizer.chat_template").empty());

  const auto tokens = file->GetStringArray("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.size(), 49152u);
  EXPECT_EQ(tokens[0], "<|endoftext|>");
  EXPECT_EQ(file->GetInt32Array("tokenizer.ggml.token_type").size(), 49152u);
  EXPECT_GT(file->GetStringArray("tokenizer.ggml.merges").size(), 48000u);

  EXPECT_EQ(file->tensors().size(), 272u);
  const TensorInfo* embd = file->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->n_dims, 2);
  EXPECT_EQ(embd->ne[0], 576);
  EXPECT_EQ(embd->ne[1], 49152);
  for (int layer = 0; layer < 30; ++layer) {
    const std::string prefix = "blk." + std::to_string(layer) + ".";
    for (const char* suffix : {"attn_norm.weight", "attn_q.weight", "attn_k.weight",
                               "attn_v.weight", "attn_output.weight", "ffn_norm.weight",
                               "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}) {
      EXPECT_NE(file->FindTensor(prefix + suffix), nullptr) << prefix + suffix;
    }
  }
  EXPECT_EQ(file->FindTensor("blk.0.attn_q.weight")->type, GgmlType::kQ4_1);
  EXPECT_NE(file->FindTensor("output_norm.weight"), nullptr);
  uint64_t tensor_bytes = 0;
  for (const TensorInfo& t : file->tensors()) tensor_bytes += t.n_bytes;
  EXPECT_LE(file->data_offset() + tensor_bytes, file->file_size());
  EXPECT_GT(file->data_offset() + tensor_bytes, file->file_size() - 32 * 272);
}

}  // namespace
}  // namespace qevict::gguf
