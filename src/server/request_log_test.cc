#include "server/request_log.h"

#include <gtest/gtest.h>

namespace qevict::server {
namespace {

using Clock = RequestLogEntry::Clock;

TEST(RequestLogTest, GenerationLineHasEveryField) {
  RequestLogEntry entry;
  const Clock::time_point start = Clock::now();
  entry.start = start;
  entry.first_token_seconds = 0.1234;
  GenerationLogFields g;
  g.prompt_tokens = 412;
  g.cached_tokens = 380;
  g.generated_tokens = 64;
  g.decode_tokens_per_second = 55.14;
  g.policy = "qevict";
  g.resident_bytes = 1234567;
  entry.generation = g;
  EXPECT_EQ(FormatRequestLogLine("POST", "/v1/chat/completions", 200, entry,
                                 start + std::chrono::milliseconds(1500)),
            "qevict serve: request POST /v1/chat/completions 200 prompt=412 cached=380 "
            "generated=64 ttft_ms=123.4 decode_tps=55.1 policy=qevict resident_bytes=1234567 "
            "total_ms=1500.0");
}

TEST(RequestLogTest, OtherRequestsHaveDashes) {
  RequestLogEntry entry;  // never routed (e.g. a malformed request line): no start either
  EXPECT_EQ(FormatRequestLogLine("GET", "/a b\n", 404, entry, Clock::now()),
            "qevict serve: request GET /a%20b%0A 404 prompt=- cached=- generated=- ttft_ms=- "
            "decode_tps=- policy=- resident_bytes=- total_ms=-");
}

TEST(RequestLogTest, BeginResetsAndFirstTokenIsKeptOnce) {
  CurrentRequestLog().generation = GenerationLogFields{};
  BeginRequestLog();
  EXPECT_FALSE(CurrentRequestLog().generation.has_value());
  ASSERT_TRUE(CurrentRequestLog().start.has_value());
  NoteFirstToken(CurrentRequestLog());
  ASSERT_TRUE(CurrentRequestLog().first_token_seconds.has_value());
  const double first = *CurrentRequestLog().first_token_seconds;
  NoteFirstToken(CurrentRequestLog());
  EXPECT_EQ(*CurrentRequestLog().first_token_seconds, first);
}

}  // namespace
}  // namespace qevict::server
