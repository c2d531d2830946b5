// The committed fixture files (scripts/make_gguf_fixtures.py): every malformed file is rejected
// with the message its manifest names, without a large allocation; the tiny valid llama model and
// its semantic mutations parse.
#include "source_dir.h"
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "util/error.h"

// Replacement global allocation functions that remember the largest single request, so the tests
// can show a crafted count never turns into a huge allocation. They only observe; allocation
// itself is plain malloc/free.
namespace {
std::atomic<size_t> g_largest_allocation{0};

void* TrackedAllocate(size_t n) {
  size_t largest = g_largest_allocation.load(std::memory_order_relaxed);
  while (n > largest && !g_largest_allocation.compare_exchange_weak(largest, n)) {
  }
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return TrackedAllocate(n); }
void* operator new[](size_t n) { return TrackedAllocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace qevict::gguf {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtureDir = fs::path(QEVICT_SOURCE_DIR) / "tests" / "fixtures" / "gguf";

struct ManifestEntry {
  std::string file;
  std::string expected;  // substring of the error message
};

// "<file> <substring>" per line; blank lines and lines starting with '#' are skipped.
std::vector<ManifestEntry> ReadManifest(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<ManifestEntry> entries;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    EXPECT_NE(space, std::string::npos) << "bad manifest line: " << line;
    if (space == std::string::npos) continue;
    entries.push_back({line.substr(0, space), line.substr(space + 1)});
  }
  return entries;
}

std::set<std::string> GgufFilesIn(const fs::path& dir) {
  std::set<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".gguf") {
      names.insert(e.path().filename().string());
    }
  }
  return names;
}

TEST(GgufFixturesTest, EveryMalformedFixtureIsRejectedWithItsMessage) {
  const std::vector<ManifestEntry> manifest = ReadManifest(kFixtureDir / "expected.txt");
  ASSERT_GE(manifest.size(), 40u);
  std::set<std::string> listed;
  for (const ManifestEntry& entry : manifest) {
    SCOPED_TRACE(entry.file);
    listed.insert(entry.file);
    const fs::path path = kFixtureDir / entry.file;
    ASSERT_TRUE(fs::exists(path)) << path << " is listed but missing";
    const size_t file_size = fs::file_size(path);
    g_largest_allocation = 0;
    std::string message;
    try {
      File::Open(path.string());
      message = "<opened without error>";
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(entry.expected), std::string::npos)
        << "message: " << message << "\nexpected to contain: " << entry.expected;
    // The path is named, and nothing big was allocated for a file of a few hundred bytes.
    EXPECT_NE(message.find(entry.file), std::string::npos) << message;
    EXPECT_LE(g_largest_allocation.load(), 4096 + 64 * file_size);
  }
  // Every top-level .gguf fixture except the valid model is in the manifest.
  std::set<std::string> on_disk = GgufFilesIn(kFixtureDir);
  on_disk.erase("tiny_llama_valid.gguf");
  EXPECT_EQ(on_disk, listed);
}

TEST(GgufFixturesTest, TinyLlamaParses) {
  const auto file = File::Open((kFixtureDir / "tiny_llama_valid.gguf").string());
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->GetString("general.architecture"), "llama");
  EXPECT_EQ(file->GetInt("llama.block_count"), 1);
  EXPECT_EQ(file->GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(file->GetInt("llama.attention.head_count"), 2);
  EXPECT_EQ(file->GetInt("llama.attention.head_count_kv"), 1);
  EXPECT_EQ(file->GetInt("llama.feed_forward_length"), 128);
  EXPECT_EQ(file->GetInt("llama.context_length"), 256);
  EXPECT_FLOAT_EQ(file->GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_FLOAT_EQ(file->GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5);
  EXPECT_EQ(file->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file->GetString("tokenizer.ggml.pre"), "smollm");
  EXPECT_FALSE(file->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(file->GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(file->GetInt("tokenizer.ggml.eos_token_id"), 2);

  const std::vector<std::string_view> tokens = file->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 300u);
  EXPECT_EQ(tokens[0], "<|endoftext|>");
  EXPECT_EQ(tokens[2], "<|im_end|>");
  EXPECT_EQ(tokens[3], "!");
  const std::vector<int32_t> types = file->GetInt32Array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 300u);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[100], 1);
  const std::vector<std::string_view> merges = file->GetStringArray("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 300u - 259u);
  EXPECT_EQ(merges[0], "\xc4\xa0 t");  // "Ġ t"
  // Every merge names two tokens of the vocabulary and produces one.
  const std::set<std::string_view> vocab(tokens.begin(), tokens.end());
  for (std::string_view merge : merges) {
    const size_t space = merge.find(' ');
    ASSERT_NE(space, std::string_view::npos);
    EXPECT_TRUE(vocab.count(merge.substr(0, space))) << merge;
    EXPECT_TRUE(vocab.count(merge.substr(space + 1))) << merge;
    std::string merged(merge.substr(0, space));
    merged += merge.substr(space + 1);
    EXPECT_TRUE(vocab.count(merged)) << merge;
  }

  EXPECT_EQ(file->tensors().size(), 11u);
  const TensorInfo* embd = file->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::kF32);
  EXPECT_EQ(embd->ne[0], 64);
  EXPECT_EQ(embd->ne[1], 300);
  for (const char* name : {"output_norm.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                           "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
                           "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                           "blk.0.ffn_down.weight"}) {
    const TensorInfo* t = file->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, GgmlType::kF32) << name;
  }
  EXPECT_EQ(file->FindTensor("blk.0.attn_k.weight")->ne[1], 32);
  EXPECT_EQ(file->FindTensor("blk.0.ffn_down.weight")->ne[0], 128);
}

TEST(GgufFixturesTest, SemanticFixturesAreValidGguf) {
  const fs::path dir = kFixtureDir / "semantic";
  const std::vector<ManifestEntry> manifest = ReadManifest(dir / "expected.txt");
  ASSERT_GE(manifest.size(), 10u);
  std::set<std::string> listed;
  for (const ManifestEntry& entry : manifest) {
    SCOPED_TRACE(entry.file);
    listed.insert(entry.file);
    std::unique_ptr<File> file;
    ASSERT_NO_THROW(file = File::Open((dir / entry.file).string()));
    EXPECT_EQ(file->GetString("general.architecture"), "llama");
    EXPECT_FALSE(entry.expected.empty());
  }
  EXPECT_EQ(GgufFilesIn(dir), listed);
}

TEST(GgufFixturesTest, OpenFailsOnMissingPathAndDirectory) {
  const std::string missing = (kFixtureDir / "no_such_file.gguf").string();
  try {
    File::Open(missing);
    ADD_FAILURE() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_file.gguf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(File::Open(kFixtureDir.string()), Error);
}

}  // namespace
}  // namespace qevict::gguf
