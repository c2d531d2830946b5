// The usage shown in include/qevict/qevict.h compiles and runs as documented.
#include <qevict/qevict.h>

#include "tests/test_support.h"

namespace qevict {
namespace {

TEST(PublicApiTest, GenerateWithQevictAtTenPercentAndReadStats) {
  QEVICT_REQUIRE_MODEL(m);
  KvConfig kv;
  kv.policy = "qevict";
  kv.budget = 0.1;
  ThreadPool pool(2);
  std::string text;
  for (int i = 0; i < 60; ++i) text += "Line " + std::to_string(i) + " of a long memo. ";
  const std::vector<int32_t> prompt = m->EncodeChat({{"user", text + "Summarize."}}, true);
  SessionOptions so;
  so.n_ctx = static_cast<int64_t>(prompt.size()) + 16;
  Session session(*m->model, pool, so, KvCacheFactoryFor(kv));
  session.BeginRun(static_cast<int64_t>(prompt.size()), 16);
  GenerateOptions go;
  go.max_new_tokens = 16;
  const GenerateResult r = Generate(session, *m->tokenizer, session.Prefill(prompt), go);
  EXPECT_FALSE(r.tokens.empty());
  const KvStats stats = session.cache().Stats();
  EXPECT_GT(stats.budget_bytes, 0);
  EXPECT_LE(stats.resident_bytes(), stats.budget_bytes);
  EXPECT_EQ(KvStatsToJson(stats)["resident_bytes"].get<int64_t>(), stats.resident_bytes());
}

TEST(PublicApiTest, BadConfigurationIsAnError) {
  KvConfig kv;
  kv.policy = "no-such-policy";
  EXPECT_THROW(KvCacheFactoryFor(kv), Error);
  kv.policy = "qevict";
  kv.budget = 1.5;
  EXPECT_THROW(KvCacheFactoryFor(kv), Error);
}

}  // namespace
}  // namespace qevict
