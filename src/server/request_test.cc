#include "server/request.h"

#include <gtest/gtest.h>

#include <string>

namespace qevict::server {
namespace {

RequestDefaults Defaults() {
  RequestDefaults d;
  d.kv.policy = "full";
  d.context_tokens = 8192;
  d.vocab_size = 1000;
  return d;
}

ChatRequest Chat(const std::string& body) {
  auto r = ParseChatRequest(body, Defaults());
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " -> " << e->message;
  return std::holds_alternative<ChatRequest>(r) ? std::get<ChatRequest>(r) : ChatRequest{};
}

ApiError ChatError(const std::string& body) {
  auto r = ParseChatRequest(body, Defaults());
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

ApiError CompletionError(const std::string& body) {
  auto r = ParseCompletionRequest(body, Defaults());
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

const char* kHello = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(RequestTest, ParsesAChatRequest) {
  const ChatRequest r = Chat(R"({"model": "m", "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null}],
      "max_tokens": 5, "temperature": 0, "top_p": 0.5, "seed": 7, "stop": ["x", ""],
      "stream": true, "stream_options": {"include_usage": true},
      "kv": {"policy": "qevict", "budget": 0.1}, "user": "ignored"})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.params.model, "m");
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_EQ(r.params.top_p, 0.5f);
  EXPECT_EQ(r.params.seed, 7u);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.params.stream);
  EXPECT_TRUE(r.params.include_usage);
  EXPECT_EQ(r.params.kv.policy, "qevict");
  EXPECT_DOUBLE_EQ(r.params.kv.budget, 0.1);
}

TEST(RequestTest, DefaultsComeFromTheServer) {
  const ChatRequest r = Chat(std::string("{") + kHello + "}");
  EXPECT_FALSE(r.params.max_tokens.has_value());
  EXPECT_FALSE(r.params.seed.has_value());
  // `qevict run`'s sampling defaults (llama.cpp's), not OpenAI's temperature 1 / top_p 1.
  EXPECT_EQ(r.params.temperature, 0.8f);
  EXPECT_EQ(r.params.top_p, 0.95f);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_EQ(r.params.min_p, 0.05f);
  EXPECT_EQ(r.params.kv.policy, "full");
  EXPECT_FALSE(r.params.stream);
}

TEST(RequestTest, PenaltiesAndLogitBiasAreParsed) {
  const ChatRequest r = Chat(std::string("{") + kHello +
                             R"(, "presence_penalty": 0.5, "frequency_penalty": -1,
                                 "repeat_penalty": 1.1, "repeat_last_n": -1, "min_p": 0,
                                 "logit_bias": {"7": -100, "12": 2.5}})");
  EXPECT_EQ(r.params.presence_penalty, 0.5f);
  EXPECT_EQ(r.params.repeat_last_n, -1);
  EXPECT_EQ(Chat(std::string("{") + kHello + "}").params.repeat_last_n, 64);  // llama.cpp's
  EXPECT_EQ(ChatError(std::string("{") + kHello + R"(, "repeat_last_n": -2})").param,
            "repeat_last_n");
  EXPECT_EQ(r.params.frequency_penalty, -1.0f);
  EXPECT_EQ(r.params.repeat_penalty, 1.1f);
  EXPECT_EQ(r.params.min_p, 0.0f);
  ASSERT_EQ(r.params.logit_bias.size(), 2u);
  EXPECT_EQ(r.params.logit_bias[0], std::make_pair(12, 2.5f));  // object keys come sorted
  EXPECT_EQ(r.params.logit_bias[1], std::make_pair(7, -100.0f));
}

TEST(RequestTest, MaxCompletionTokensIsAnAlias) {
  EXPECT_EQ(Chat(std::string("{") + kHello + R"(, "max_completion_tokens": 9})").params.max_tokens,
            9);
}

TEST(RequestTest, MalformedJsonIs400) {
  for (const char* body : {"", "{", "{bad", "[1, 2]", "\"text\"", "{\"a\": 1e999999}"}) {
    const ApiError e = ChatError(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(RequestTest, DeepNestingIs400) {
  std::string body = "{\"x\": " + std::string(10000, '[') + std::string(10000, ']') + "}";
  EXPECT_EQ(ChatError(body).code, "invalid_json");
}

TEST(RequestTest, WrongTypesName400WithTheField) {
  struct Case {
    std::string body;
    std::string param;
  };
  const Case cases[] = {
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [1]})", "messages[0]"},
      {R"({"messages": [{"role": 1, "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0].type"},
      {std::string("{") + kHello + R"(, "max_tokens": "x"})", "max_tokens"},
      {std::string("{") + kHello + R"(, "max_tokens": 0})", "max_tokens"},
      {std::string("{") + kHello + R"(, "max_tokens": 1.5})", "max_tokens"},
      {std::string("{") + kHello + R"(, "max_tokens": 100000})", "max_tokens"},
      {std::string("{") + kHello + R"(, "temperature": "hot"})", "temperature"},
      {std::string("{") + kHello + R"(, "temperature": 3})", "temperature"},
      {std::string("{") + kHello + R"(, "top_p": 1.5})", "top_p"},
      {std::string("{") + kHello + R"(, "presence_penalty": 3})", "presence_penalty"},
      {std::string("{") + kHello + R"(, "logit_bias": {"x": 1}})", "logit_bias"},
      {std::string("{") + kHello + R"(, "logit_bias": {"1": 101}})", "logit_bias.1"},
      {std::string("{") + kHello + R"(, "logit_bias": [1]})", "logit_bias"},
      {std::string("{") + kHello + R"(, "min_p": 2})", "min_p"},
      {std::string("{") + kHello + R"(, "seed": "1"})", "seed"},
      {std::string("{") + kHello + R"(, "stop": 3})", "stop"},
      {std::string("{") + kHello + R"(, "stop": ["a", "b", "c", "d", "e"]})", "stop"},
      {std::string("{") + kHello + R"(, "stream": "yes"})", "stream"},
      {std::string("{") + kHello + R"(, "stream_options": {"include_usage": true}})",
       "stream_options"},
      {std::string("{") + kHello + R"(, "n": 2})", "n"},
      {std::string("{") + kHello + R"(, "tools": [{"type": "function"}]})", "tools"},
      {std::string("{") + kHello + R"(, "model": 3})", "model"},
  };
  for (const Case& c : cases) {
    const ApiError e = ChatError(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_EQ(e.type, "invalid_request_error");
  }
}

TEST(RequestTest, KvOptionsAreValidated) {
  struct Case {
    std::string kv;
    std::string param;
  };
  const Case cases[] = {
      {R"("qevict")", "kv"},
      {R"({"policy": "nope"})", "kv.policy"},
      {R"({"policy": "qevict", "budget": 0})", "kv.budget"},
      {R"({"policy": "qevict", "budget": 2})", "kv.budget"},
      {R"({"policy": "qevict", "budget": -0.5})", "kv.budget"},
      {R"({"policy": "qevict", "budget": "0.1"})", "kv.budget"},
      {R"({"policy": "qevict", "budget": 0.1, "budget_bytes": 1000})", "kv.budget"},
      {R"({"policy": "qevict", "budget": 0.1, "ratio": 0.9})", "kv.budget"},
      {R"({"policy": "qevict", "ratio": 1})", "kv.ratio"},
      {R"({"policy": "qevict", "ratio": -0.1})", "kv.ratio"},
      {R"({"budget": 0.1})", "kv.policy"},  // the server's default policy is full
      {R"({"policy": "qevict", "bits": 3})", "kv.bits"},
      {R"({"policy": "qevict", "window": 0})", "kv.window"},
      {R"({"policy": "qevict", "recovery": "best"})", "kv.recovery"},
      {R"({"policy": "qevict", "colour": 1})", "kv.colour"},
  };
  for (const Case& c : cases) {
    const ApiError e = ChatError(std::string("{") + kHello + R"(, "kv": )" + c.kv + "}");
    EXPECT_EQ(e.status, 400) << c.kv;
    EXPECT_EQ(e.param, c.param) << c.kv << " -> " << e.message;
  }
}

TEST(RequestTest, RequestBudgetReplacesTheServersForm) {
  RequestDefaults d = Defaults();
  d.kv.policy = "qevict";
  d.kv.budget_bytes = 50000;
  auto r = ParseChatRequest(std::string("{") + kHello + R"(, "kv": {"budget": 0.2}})", d);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  EXPECT_EQ(std::get<ChatRequest>(r).params.kv.budget_bytes, -1);
  EXPECT_DOUBLE_EQ(std::get<ChatRequest>(r).params.kv.budget, 0.2);

  d.kv.budget_bytes = -1;
  d.kv.budget = 0.1;
  r = ParseChatRequest(std::string("{") + kHello + R"(, "kv": {"policy": "full"}})", d);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  EXPECT_DOUBLE_EQ(std::get<ChatRequest>(r).params.kv.budget, 1.0);
}

TEST(RequestTest, RatioIsTheShareRemoved) {
  auto r = ParseChatRequest(std::string("{") + kHello +
                                R"(, "kv": {"policy": "qevict", "ratio": 0.9}})",
                            Defaults());
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  EXPECT_NEAR(std::get<ChatRequest>(r).params.kv.budget, 0.1, 1e-12);
}

TEST(RequestTest, ParsesCompletionPrompts) {
  auto text = ParseCompletionRequest(R"({"prompt": "once"})", Defaults());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(text));
  EXPECT_EQ(std::get<CompletionRequest>(text).prompt_text, "once");

  auto one = ParseCompletionRequest(R"({"prompt": ["once"]})", Defaults());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(one));
  EXPECT_EQ(std::get<CompletionRequest>(one).prompt_text, "once");

  auto tokens = ParseCompletionRequest(R"({"prompt": [1, 2, 999]})", Defaults());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(tokens));
  EXPECT_EQ(std::get<CompletionRequest>(tokens).prompt_tokens, (std::vector<int32_t>{1, 2, 999}));
  EXPECT_FALSE(std::get<CompletionRequest>(tokens).prompt_text.has_value());
}

TEST(RequestTest, BadCompletionPromptsAre400) {
  EXPECT_EQ(CompletionError(R"({})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt": 5})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt": ["a", "b"]})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt": [1, 1000]})").param, "prompt[1]");
  EXPECT_EQ(CompletionError(R"({"prompt": [1, -1]})").param, "prompt[1]");
  EXPECT_EQ(CompletionError(R"({"prompt": "x", "echo": true})").param, "echo");
  EXPECT_EQ(CompletionError(R"({"prompt": "x", "logprobs": 6})").param, "logprobs");
  EXPECT_EQ(CompletionError(R"({"prompt": "x", "logprobs": true})").param, "logprobs");
}

TEST(RequestTest, LogprobsAsEachEndpointSpellsThem) {
  EXPECT_EQ(Chat(std::string("{") + kHello + "}").params.top_logprobs, -1);
  EXPECT_EQ(Chat(std::string("{") + kHello + R"(, "logprobs": true})").params.top_logprobs, 0);
  EXPECT_EQ(Chat(std::string("{") + kHello + R"(, "logprobs": true, "top_logprobs": 3})")
                .params.top_logprobs,
            3);
  EXPECT_EQ(ChatError(std::string("{") + kHello + R"(, "top_logprobs": 3})").param,
            "top_logprobs");
  EXPECT_EQ(ChatError(std::string("{") + kHello + R"(, "logprobs": true, "top_logprobs": 21})")
                .param,
            "top_logprobs");
  auto r = ParseCompletionRequest(R"({"prompt": "x", "logprobs": 2})", Defaults());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
  EXPECT_EQ(std::get<CompletionRequest>(r).params.top_logprobs, 2);
}

TEST(RequestTest, InvalidUtf8Is400) {
  const ApiError e = ChatError("{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
}

}  // namespace
}  // namespace qevict::server

namespace qevict::server {
namespace {

// Each rejection names the field and says what to send instead.
TEST(RequestTest, RejectionsSayWhatToDo) {
  const std::string hello = std::string("{") + kHello;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {hello + R"(, "n": 2})", "send one request per choice"},
      {hello + R"(, "best_of": 3})", "leave best_of out"},
      {hello + R"(, "tools": [{"type": "function"}]})", "leave 'tools' out"},
      {hello + R"(, "response_format": {"type": "json_object"}})", "leave it out"},
      {hello + R"(, "stream_options": {"include_usage": true}})", "add \"stream\": true"},
      {hello + R"(, "repeat_last_n": -2})", "must be in [-1, "},
      {hello + R"(, "seed": 18446744073709551615})", "is over 9223372036854775807"},
      {R"({"messages": []})", "give at least one {\"role\": \"user\""},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "send the text as {\"type\": \"text\""},
  };
  for (const auto& [body, fix] : cases) {
    const std::string message = ChatError(body).message;
    EXPECT_NE(message.find(fix), std::string::npos) << body << " -> " << message;
  }
  EXPECT_NE(CompletionError(R"({"prompt": "x", "echo": true})").message.find("prepend the prompt"),
            std::string::npos);
}

}  // namespace
}  // namespace qevict::server
