// Replays kept fuzz inputs through the fuzz targets' own entry points (fuzz/targets/*.h): every
// finding kept under tests/fuzz_regressions/<target>/, every seed under fuzz/corpus/<target>/ and
// every GGUF fixture. Also checks the fixtures of security class 7 fail to load with their
// messages, and the limits added for findings that need inputs too large to keep as files.
#include "source_dir.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_entry_points.h"
#include "gguf/gguf.h"
#include "gguf/gguf_test_writer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qevict::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = QEVICT_SOURCE_DIR;
const fs::path kRegressionDir = kRoot / "tests" / "fuzz_regressions";
const fs::path kCorpusDir = kRoot / "fuzz" / "corpus";
const fs::path kGgufFixtureDir = kRoot / "tests" / "fixtures" / "gguf";

// Regular files under dir (recursively), sorted; none when dir does not exist.
std::vector<fs::path> FilesUnder(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Runs every file under dir through the target; returns how many ran.
int ReplayAll(const std::string& target, const fs::path& dir) {
  const FuzzFunction entry = FuzzTargets().at(target);
  int replayed = 0;
  for (const fs::path& path : FilesUnder(dir)) {
    const std::vector<uint8_t> bytes = ReadBytes(path);
    EXPECT_NO_THROW(entry(bytes.data(), bytes.size())) << target << " on " << path;
    ++replayed;
  }
  return replayed;
}

TEST(FuzzRegressionTest, EveryTargetIsRegisteredWithASeedCorpus) {
  for (const char* name : {"gguf", "tokenizer", "chat_template"}) {
    EXPECT_TRUE(FuzzTargets().contains(name)) << name;
  }
  for (const auto& [name, entry] : FuzzTargets()) {
    EXPECT_FALSE(FilesUnder(kCorpusDir / name).empty()) << "no seeds in fuzz/corpus/" << name;
  }
}

TEST(FuzzRegressionTest, EveryRegressionDirectoryNamesATarget) {
  ASSERT_TRUE(fs::is_directory(kRegressionDir));
  for (const fs::directory_entry& e : fs::directory_iterator(kRegressionDir)) {
    if (!e.is_directory()) continue;  // README
    EXPECT_TRUE(FuzzTargets().contains(e.path().filename().string()))
        << e.path() << " is not the name of a fuzz target";
  }
}

TEST(FuzzRegressionTest, KeptFindingsReplayCleanly) {
  for (const auto& [name, entry] : FuzzTargets()) ReplayAll(name, kRegressionDir / name);
}

TEST(FuzzRegressionTest, SeedCorporaReplayCleanly) {
  for (const auto& [name, entry] : FuzzTargets()) ReplayAll(name, kCorpusDir / name);
}

TEST(FuzzRegressionTest, EveryGgufFixtureReplaysCleanly) {
  EXPECT_GT(ReplayAll("gguf", kGgufFixtureDir), 40);
}

// Loads bytes as the gguf target does; the errors of every loading stage, in order.
std::vector<std::string> LoadErrors(const std::vector<uint8_t>& bytes) {
  const std::unique_ptr<gguf::File> file = gguf::File::Parse(bytes);
  return LoadModelParts(*file);
}

TEST(FuzzRegressionTest, GeneratedGgufSeedsLoadWithoutError) {
  int seeds = 0;
  for (const fs::path& path : FilesUnder(kCorpusDir / "gguf")) {
    if (!path.filename().string().starts_with("mini_")) continue;
    ++seeds;
    const std::vector<std::string> errors = LoadErrors(ReadBytes(path));
    EXPECT_TRUE(errors.empty()) << path << ": " << errors.front();
  }
  EXPECT_GE(seeds, 4);
  EXPECT_TRUE(LoadErrors(ReadBytes(kGgufFixtureDir / "tiny_llama_valid.gguf")).empty());
}

// Security class 7 (semantics): each fixture parses as GGUF, and the first loading stage to fail
// reports what semantic/expected.txt names.
TEST(FuzzRegressionTest, SemanticFixturesFailToLoadWithTheirMessage) {
  std::ifstream manifest(kGgufFixtureDir / "semantic" / "expected.txt");
  ASSERT_TRUE(manifest.good());
  int checked = 0;
  for (std::string line; std::getline(manifest, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    const std::string file = line.substr(0, space);
    const std::string expected = line.substr(space + 1);
    const std::vector<std::string> errors =
        LoadErrors(ReadBytes(kGgufFixtureDir / "semantic" / file));
    ASSERT_FALSE(errors.empty()) << file << " loads without error";
    EXPECT_NE(errors.front().find(expected), std::string::npos)
        << file << ": '" << errors.front() << "' lacks '" << expected << "'";
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

// Finding 1 (hang): finding the default system message of a ChatML template rescanned the rest
// of the template from every "<|im_start|>system\n", quadratic in a crafted GGUF's template.
// The kept input has 5000 headers; this one has 100000 (1.9 MB) and must still be instant.
TEST(FuzzRegressionTest, ChatMlDefaultSystemScanIsLinear) {
  for (const std::string header : {"<|im_start|>system\n", "<|im_start|>system\\n"}) {
    std::string tmpl;
    for (int i = 0; i < 100000; ++i) tmpl += header;
    const auto start = std::chrono::steady_clock::now();
    const std::optional<ChatTemplate> chat = ParseChatTemplate(tmpl);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(chat.has_value());
    EXPECT_EQ(chat->default_system, "");
    EXPECT_LT(seconds, 5.0);
  }
}

// Finding 2 (over-large allocation): a vocabulary array's count was bounded only by the file
// size, and each entry costs far more memory than its bytes in the file. Counts over the limit
// are refused before the array is read. (The input is 32 MiB, too large to keep as a file.)
TEST(FuzzRegressionTest, VocabularyCountsOverTheLimitAreRefusedBeforeReading) {
  constexpr uint64_t kCount = (uint64_t{1} << 22) + 1;
  gguf::testing::ByteWriter w;
  w.Raw({'G', 'G', 'U', 'F'});
  w.U32(3);
  w.U64(0);  // tensors
  w.U64(2);  // metadata entries
  w.Str("tokenizer.ggml.model");
  w.U32(static_cast<uint32_t>(gguf::ValueType::kString));
  w.Str("gpt2");
  w.Str("tokenizer.ggml.tokens");
  w.U32(static_cast<uint32_t>(gguf::ValueType::kArray));
  w.U32(static_cast<uint32_t>(gguf::ValueType::kString));
  w.U64(kCount);
  w.bytes().resize(w.bytes().size() + kCount * 8, 0);  // empty strings
  const std::unique_ptr<gguf::File> file = gguf::File::Parse(w.bytes());
  try {
    Tokenizer::FromGguf(*file);
    FAIL() << "a vocabulary of " << kCount << " tokens was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qevict::fuzz
