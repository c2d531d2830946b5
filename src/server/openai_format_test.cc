#include "server/openai_format.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace qevict::server {
namespace {

using nlohmann::json;

TEST(OpenAiFormatTest, ChatBodyHasMessageAndUsage) {
  const ResponseHeader h = NewResponseHeader(Endpoint::kChat, "m");
  EXPECT_EQ(h.id.rfind("chatcmpl-", 0), 0u);
  const json body = CompletionBody(h, "hello", "stop", {3, 2}, json());
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["total_tokens"], 5);
  EXPECT_FALSE(body.contains("kv"));
}

TEST(OpenAiFormatTest, CompletionChunksCarryText) {
  const ResponseHeader h = NewResponseHeader(Endpoint::kCompletion, "m");
  EXPECT_EQ(h.id.rfind("cmpl-", 0), 0u);
  const json chunk = TextChunk(h, "abc");
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "abc");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(FinishChunk(h, "length", json())["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiFormatTest, ChatChunksCarryDeltas) {
  const ResponseHeader h = NewResponseHeader(Endpoint::kChat, "m");
  EXPECT_EQ(RoleChunk(h)["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(TextChunk(h, "x")["choices"][0]["delta"]["content"], "x");
  EXPECT_EQ(TextChunk(h, "x")["object"], "chat.completion.chunk");
  const json usage = UsageChunk(h, {4, 6});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
}

TEST(OpenAiFormatTest, SseEventsSurviveInvalidUtf8) {
  const ResponseHeader h = NewResponseHeader(Endpoint::kCompletion, "m");
  const std::string event = SseEvent(TextChunk(h, "a\xff"));
  EXPECT_EQ(event.rfind("data: {", 0), 0u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  EXPECT_NE(event.find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD
}

TEST(OpenAiFormatTest, ErrorsHaveTheOpenAiShape) {
  const json j = InvalidRequest("bad", "max_tokens", "invalid_value").ToJson();
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_TRUE(NotFound("x").ToJson()["error"]["param"].is_null());
  EXPECT_EQ(ErrorForStatus(413).status, 413);
}

TEST(OpenAiFormatTest, ModelList) {
  const json list = ModelList("smol", 5);
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"][0]["id"], "smol");
  EXPECT_EQ(list["data"][0]["object"], "model");
}

}  // namespace
}  // namespace qevict::server
