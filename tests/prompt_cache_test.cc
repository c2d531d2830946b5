// The prompt cache (engine/prompt_cache.h): a conversation saved after a turn and restored into
// a fresh one continues exactly as the original does -- same logits, same tokens, same tiers and
// counters -- for every policy, on both reference models (Gemma's sliding-window rings
// included); a prompt equal to the saved tokens needs no prefill at all; and a file that is not
// what it claims (another model, other KV options, truncated, corrupt, or with altered contents
// behind a valid checksum) is refused with an Error, never a crash, and leaves the conversation
// usable.
#include "engine/prompt_cache.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/chat_prompt.h"
#include "engine/conversation.h"
#include "policy/registry.h"
#include "tests/test_support.h"

namespace qevict {
namespace {

std::string Document(int entries) {
  std::string text;
  for (int i = 0; i < entries; ++i) {
    text += "Record " + std::to_string(i) + ": crate " + std::to_string(300 + 37 * i) +
            " went to dock " + std::to_string(i % 9) + ". ";
  }
  return text;
}

KvConfig Config(const std::string& policy, double budget) {
  KvConfig c;
  c.policy = policy;
  c.budget = budget;
  c.prefill_chunk = 0;  // the paper's prompt-end mode (bounded prefill is covered below)
  return c;
}

SessionOptions Options(int64_t n_ctx) {
  SessionOptions o;
  o.n_ctx = n_ctx;
  o.prefill_chunk = 128;
  return o;
}

std::vector<int32_t> Extend(std::vector<int32_t> tokens, const LoadedModel& m,
                            const std::string& text) {
  const std::vector<int32_t> more = m.tokenizer->Encode(text, false, false);
  tokens.insert(tokens.end(), more.begin(), more.end());
  return tokens;
}

// What two conversations must agree on after the same turn.
void ExpectSameState(const Conversation& a, const Conversation& b, const std::string& what) {
  EXPECT_EQ(a.tokens(), b.tokens()) << what;
  const std::span<const float> la = a.next_logits(), lb = b.next_logits();
  ASSERT_EQ(la.size(), lb.size()) << what;
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size_bytes())) << what << ": logits differ";
  const KvStats sa = a.session().cache().Stats(), sb = b.session().cache().Stats();
  EXPECT_EQ(sa.tokens_seen, sb.tokens_seen) << what;
  EXPECT_EQ(sa.tokens_resident, sb.tokens_resident) << what;
  EXPECT_EQ(sa.fp16_bytes, sb.fp16_bytes) << what;
  EXPECT_EQ(sa.quant_bytes, sb.quant_bytes) << what;
  EXPECT_EQ(sa.meta_bytes, sb.meta_bytes) << what;
  EXPECT_EQ(sa.budget_bytes, sb.budget_bytes) << what;
  EXPECT_EQ(sa.fp16_windows, sb.fp16_windows) << what;
  EXPECT_EQ(sa.quant_windows, sb.quant_windows) << what;
  EXPECT_EQ(sa.evicted_windows, sb.evicted_windows) << what;
  EXPECT_EQ(sa.promotions, sb.promotions) << what;
  EXPECT_EQ(sa.demotions, sb.demotions) << what;
  EXPECT_EQ(sa.routing_steps, sb.routing_steps) << what;
  EXPECT_EQ(sa.peak_bytes, sb.peak_bytes) << what;
  EXPECT_EQ(sa.sliding_bytes, sb.sliding_bytes) << what;
  EXPECT_EQ(sa.infeasible, sb.infeasible) << what;
}

// Turn 1 (document, 12 generated tokens) in `original`; its state restored into a fresh
// conversation; turn 2 (a question) in both. Returns the number of quantized windows after
// turn 2 (so callers can check the compressed path was exercised).
int64_t SaveRestoreContinue(const LoadedModel& m, const KvConfig& config, int entries) {
  ThreadPool pool(2);
  const int64_t n_ctx = 4096;
  Conversation original(*m.model, pool, Options(n_ctx), testing::PolicyCacheFactory(config));
  // qevict-zip / kvzip reconstruct the document at its end (engine/score_hooks.h); the restored
  // conversation's first prompt end is behind it.
  original.session().set_score_context(MakeScoreContext(*m.tokenizer, config, Document(entries)));
  const std::vector<int32_t> first = m.EncodeRaw(Document(entries));
  TurnStart start = original.Prefill(first, 12);
  EXPECT_EQ(start.reused_tokens, 0);
  original.Generate(*m.tokenizer, start.logits, testing::Greedy(12));

  ByteWriter saved;
  original.SaveState(saved);
  Conversation restored(*m.model, pool, Options(n_ctx), testing::PolicyCacheFactory(config));
  ByteReader in(saved.bytes(), "saved state");
  restored.LoadState(in);
  EXPECT_EQ(in.remaining(), 0u);
  ExpectSameState(original, restored, config.policy + " after restoring");

  const std::vector<int32_t> second =
      Extend(original.tokens(), m, " Question: which dock took crate 448? Answer: dock");
  const int64_t held = static_cast<int64_t>(original.tokens().size());
  const TurnStart a = original.Prefill(second, 16);
  const TurnStart b = restored.Prefill(second, 16);
  EXPECT_EQ(a.reused_tokens, held);
  EXPECT_EQ(b.reused_tokens, held);
  EXPECT_GT(b.reused_tokens, static_cast<int64_t>(first.size()));
  const GenerateResult ga = original.Generate(*m.tokenizer, a.logits, testing::Greedy(16));
  const GenerateResult gb = restored.Generate(*m.tokenizer, b.logits, testing::Greedy(16));
  EXPECT_EQ(ga.tokens, gb.tokens) << config.policy;
  EXPECT_FALSE(ga.tokens.empty());
  ExpectSameState(original, restored, config.policy + " after a further turn");
  return restored.session().cache().Stats().quant_windows;
}

class PromptCachePolicyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PromptCachePolicyTest, RestoredConversationContinuesExactly) {
  QEVICT_REQUIRE_MODEL(m);
  const KvConfig config = Config(GetParam(), GetParam() == "full" ? 1.0 : 0.25);
  const int64_t quant = SaveRestoreContinue(*m, config, 36);
  if (GetParam() == "qevict" || GetParam() == "mikv" || GetParam() == "qevict-qa") {
    EXPECT_GT(quant, 0) << "the 2-bit tier was not exercised";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PromptCachePolicyTest, ::testing::ValuesIn(PolicyNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

TEST(PromptCacheTest, BoundedPrefillAndExactRecoveryRestoreExactly) {
  QEVICT_REQUIRE_MODEL(m);
  KvConfig config = Config("qevict", 0.2);
  config.prefill_chunk = 256;
  config.recovery = RecoveryFidelity::kExact;
  EXPECT_GT(SaveRestoreContinue(*m, config, 60), 0);
}

TEST(PromptCacheTest, GemmaRingsAndGlobalLayersRestoreExactly) {
  QEVICT_REQUIRE_GEMMA(g);
  // Longer than Gemma's sliding window, so the rings have wrapped.
  ASSERT_LT(g->model->config().sliding_window, 700);
  for (const std::string policy : {"full", "qevict"}) {
    SaveRestoreContinue(*g, Config(policy, policy == "full" ? 1.0 : 0.5), 60);
  }
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("qevict_prompt_cache_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// The payload's offset in a prompt cache file: magic, version, three strings, payload size.
size_t PayloadOffset(const std::vector<uint8_t>& bytes) {
  size_t at = 12;
  for (int s = 0; s < 3; ++s) {
    uint64_t len;
    std::memcpy(&len, bytes.data() + at, 8);
    at += 8 + len;
  }
  return at + 8;
}

class PromptCacheFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = testing::ReferenceModel();
    if (m_ == nullptr) GTEST_SKIP() << "reference model not found (make setup)";
    config_ = Config("qevict", 0.2);
    key_ = MakePromptCacheKey(testing::ReferenceModelPath(), config_);
    path_ = TempPath("file");
    prompt_ = m_->EncodeRaw(Document(28));
    Conversation c(*m_->model, pool_, Options(2048), testing::PolicyCacheFactory(config_));
    const TurnStart start = c.Prefill(prompt_, 8);
    logits_.assign(start.logits.begin(), start.logits.end());
    saved_bytes_ = SavePromptCache(path_, key_, c);
    expected_ = c.Generate(*m_->tokenizer, start.logits, testing::Greedy(8)).tokens;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  Conversation Fresh() {
    return Conversation(*m_->model, pool_, Options(2048), testing::PolicyCacheFactory(config_));
  }

  const LoadedModel* m_ = nullptr;
  ThreadPool pool_{2};
  KvConfig config_;
  PromptCacheKey key_;
  std::string path_;
  std::vector<int32_t> prompt_;
  std::vector<float> logits_;
  std::vector<int32_t> expected_;
  int64_t saved_bytes_ = 0;
};

TEST_F(PromptCacheFileTest, SamePromptNeedsNoPrefillAndGeneratesTheSame) {
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(path_)), saved_bytes_);
  std::optional<PromptCacheFile> file = PromptCacheFile::Open(path_, key_);
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(file->tokens(), prompt_);
  Conversation c = Fresh();
  file->RestoreInto(c);
  const TurnStart start = c.Prefill(prompt_, 8);
  EXPECT_EQ(start.reused_tokens, static_cast<int64_t>(prompt_.size()));
  EXPECT_EQ(c.session().timings().prompt_tokens, 0);
  ASSERT_EQ(start.logits.size(), logits_.size());
  EXPECT_EQ(0, std::memcmp(start.logits.data(), logits_.data(), start.logits.size_bytes()));
  EXPECT_EQ(c.Generate(*m_->tokenizer, start.logits, testing::Greedy(8)).tokens, expected_);
  // The file holds the compressed cache: well under the fp16 cache of its tokens.
  const KvStats stats = c.session().cache().Stats();
  EXPECT_LT(saved_bytes_, stats.full_fp16_bytes / 2);
}

TEST_F(PromptCacheFileTest, MissingFileIsNoCache) {
  EXPECT_FALSE(PromptCacheFile::Open(TempPath("absent"), key_).has_value());
}

TEST_F(PromptCacheFileTest, OtherModelOrOptionsAreRefusedSayingWhat) {
  PromptCacheKey other_model = key_;
  other_model.model = "1:0:0";
  try {
    PromptCacheFile::Open(path_, other_model);
    FAIL() << "another model's cache was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  KvConfig h2o = config_;
  h2o.policy = "h2o";
  try {
    PromptCacheFile::Open(path_, MakePromptCacheKey(testing::ReferenceModelPath(), h2o));
    FAIL() << "a cache of other KV options was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-policy qevict"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--kv-policy h2o"), std::string::npos) << e.what();
  }
}

TEST_F(PromptCacheFileTest, TruncatedOrCorruptFilesAreRefused) {
  const std::vector<uint8_t> bytes = ReadBytes(path_);
  const std::string broken = TempPath("broken");
  int refused = 0, tried = 0;
  for (size_t cut : {size_t{0}, size_t{5}, size_t{12}, size_t{40}, bytes.size() / 3,
                     bytes.size() / 2, bytes.size() - 9, bytes.size() - 1}) {
    WriteBytes(broken, {bytes.begin(), bytes.begin() + cut});
    ++tried;
    try {
      std::optional<PromptCacheFile> f = PromptCacheFile::Open(broken, key_);
      Conversation c = Fresh();
      f->RestoreInto(c);
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_EQ(refused, tried) << "a truncated file was accepted";
  std::vector<uint8_t> flipped = bytes;
  flipped[PayloadOffset(bytes) + 100] ^= 0x40;
  WriteBytes(broken, flipped);
  try {
    PromptCacheFile::Open(broken, key_);
    FAIL() << "a corrupt payload was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> not_ours = bytes;
  not_ours[0] = 'X';
  WriteBytes(broken, not_ours);
  EXPECT_THROW(PromptCacheFile::Open(broken, key_), Error);
  std::filesystem::remove(broken);
}

// Altered contents behind a valid checksum reach the loaders' own checks: each mutation is
// either restored (a value no check can tell from a real one, e.g. a key's bits) or refused
// with an Error; afterwards the conversation still works. Under ASan (make test-asan) this also
// proves no read or write goes out of bounds.
TEST_F(PromptCacheFileTest, AlteredStateIsRefusedOrHarmless) {
  const std::vector<uint8_t> bytes = ReadBytes(path_);
  const size_t payload = PayloadOffset(bytes);
  const size_t payload_size = bytes.size() - 8 - payload;
  const std::string altered = TempPath("altered");
  std::mt19937_64 rng(7);
  int refused = 0;
  Conversation c = Fresh();
  for (int trial = 0; trial < 120; ++trial) {
    std::vector<uint8_t> b = bytes;
    // Half the mutations hit the first 64 KiB (tokens, logits, cache headers, counts), where the
    // structure is; the rest anywhere.
    const size_t span = trial % 2 == 0 ? std::min<size_t>(payload_size, 1 << 16) : payload_size;
    const size_t at = payload + rng() % span;
    b[at] = trial % 3 == 0 ? 0xff : static_cast<uint8_t>(b[at] ^ (1u << (rng() % 8)));
    const uint64_t sum = PromptCacheChecksum({b.data() + payload, payload_size});
    std::memcpy(b.data() + payload + payload_size, &sum, 8);
    WriteBytes(altered, b);
    try {
      PromptCacheFile::Open(altered, key_)->RestoreInto(c);
    } catch (const Error&) {
      ++refused;
      EXPECT_TRUE(c.tokens().empty());
    }
  }
  EXPECT_GT(refused, 0) << "no mutation reached a check";
  // Still usable: a new run from scratch.
  c.Forget();
  const TurnStart start = c.Prefill(prompt_, 8);
  EXPECT_EQ(start.reused_tokens, 0);
  EXPECT_EQ(c.Generate(*m_->tokenizer, start.logits, testing::Greedy(8)).tokens, expected_);
  std::filesystem::remove(altered);
}

}  // namespace
}  // namespace qevict

namespace qevict {
namespace {

// --prompt-cache with the chat template (`run --chat`, `chat -f`): the document turn -- the
// conversation up to the document's end -- encodes to the same tokens whatever question follows,
// so a cache saved there is continued by every later question: only the question and the
// template's closing are prefilled, and the answer is the one a conversation that read the
// document turn itself gives.
TEST(PromptCacheChatTest, DocumentTurnIsAStablePrefixOfEveryQuestion) {
  const LoadedModel* m = testing::ReferenceModel();
  if (m == nullptr) GTEST_SKIP() << "reference model not found (make setup)";
  // A document ending without a newline, then questions opening with one: one encoding of the
  // whole rendering would merge the boundary differently for each.
  const std::string document = Document(6) + "The code is 4172.";
  const auto turn = [&](const std::string& question) {
    const std::vector<ChatMessage> messages = {{"user", document + "\n\n" + question}};
    return EncodeChatSplit(*m, messages, 0, document.size());
  };
  const SplitChatPrompt alone = EncodeChatSplit(*m, {{"user", document}}, 0, document.size());
  const SplitChatPrompt first = turn("What is the code?");
  const SplitChatPrompt second = turn("\nAnd the crate of record 2?");
  ASSERT_GT(alone.stable, 0u);
  ASSERT_LT(alone.stable, alone.tokens.size());  // the template's closing follows
  for (const SplitChatPrompt* p : {&first, &second}) {
    ASSERT_EQ(p->stable, alone.stable);
    EXPECT_TRUE(std::equal(alone.tokens.begin(), alone.tokens.begin() + alone.stable,
                           p->tokens.begin()));
  }
  // The rendering itself is the template's: decoded, it is what EncodeChat renders.
  EXPECT_EQ(m->tokenizer->Decode(first.tokens, /*render_special=*/true),
            m->tokenizer->Decode(m->EncodeChat({{"user", document + "\n\nWhat is the code?"}},
                                               true),
                                 /*render_special=*/true));

  // Saved after the document turn, restored: the question continues from every saved token.
  const KvConfig config = Config("qevict", 0.3);
  ThreadPool pool(2);
  const std::string path = TempPath("chat");
  const std::vector<int32_t> doc(alone.tokens.begin(), alone.tokens.begin() + alone.stable);
  Conversation reader(*m->model, pool, Options(2048), testing::PolicyCacheFactory(config));
  reader.Prefill(doc, 16);
  SavePromptCache(path, MakePromptCacheKey(testing::ReferenceModelPath(), config), reader);
  const TurnStart direct = reader.Prefill(first.tokens, 16);
  const std::vector<int32_t> want =
      reader.Generate(*m->tokenizer, direct.logits, testing::Greedy(16)).tokens;

  std::optional<PromptCacheFile> file =
      PromptCacheFile::Open(path, MakePromptCacheKey(testing::ReferenceModelPath(), config));
  ASSERT_TRUE(file.has_value());
  Conversation restored(*m->model, pool, Options(2048), testing::PolicyCacheFactory(config));
  file->RestoreInto(restored);
  const TurnStart start = restored.Prefill(first.tokens, 16);
  EXPECT_EQ(start.reused_tokens, static_cast<int64_t>(alone.stable));
  EXPECT_EQ(restored.session().timings().prompt_tokens,
            static_cast<int64_t>(first.tokens.size() - alone.stable));
  EXPECT_EQ(restored.Generate(*m->tokenizer, start.logits, testing::Greedy(16)).tokens, want);
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

}  // namespace
}  // namespace qevict
