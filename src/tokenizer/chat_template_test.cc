#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer_test_util.h"
#include "util/error.h"

namespace qevict {
namespace {

std::vector<ChatMessage> Messages(const nlohmann::json& list) {
  std::vector<ChatMessage> messages;
  for (const nlohmann::json& m : list) messages.push_back({m["role"], m["content"]});
  return messages;
}

TEST(ChatTemplateTest, RecognizesSmolLm2TemplateAndItsDefaultSystem) {
  const nlohmann::json golden = testing::LoadGolden("tokenizer_smollm2.json");
  const std::optional<ChatTemplate> tmpl =
      ParseChatTemplate(golden["chat_template"].get<std::string>());
  ASSERT_TRUE(tmpl.has_value());
  EXPECT_EQ(tmpl->style, ChatStyle::kChatML);
  EXPECT_STREQ(ChatStyleName(tmpl->style), "chatml");
  EXPECT_EQ(tmpl->default_system,
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_FALSE(tmpl->renders_bos);
  for (const nlohmann::json& chat : golden["chats"]) {
    EXPECT_EQ(RenderChat(*tmpl, Messages(chat["messages"]), chat["add_generation_prompt"]),
              chat["rendered"].get<std::string>())
        << chat["messages"].dump();
  }
}

TEST(ChatTemplateTest, ChatMlWithoutFixedSystemMessage) {
  const std::string qwen_like =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\n' + default_prompt + '<|im_end|>\\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
      "{% endfor %}";
  const std::optional<ChatTemplate> tmpl = ParseChatTemplate(qwen_like);
  ASSERT_TRUE(tmpl.has_value());
  EXPECT_EQ(tmpl->default_system, "");
  EXPECT_EQ(RenderChat(*tmpl, {{"user", "hi"}}, true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

// Llama-3 and Llama-2 renderings by jinja2 (tests/golden/tokenizer_chat.json).
TEST(ChatTemplateTest, MatchesJinjaForLlamaGemmaAndPhi3) {
  const nlohmann::json golden = testing::LoadGolden("tokenizer_chat.json");
  ASSERT_EQ(golden["families"].size(), 4u);
  for (const nlohmann::json& family : golden["families"]) {
    std::optional<ChatTemplate> tmpl = ParseChatTemplate(family["template"].get<std::string>());
    ASSERT_TRUE(tmpl.has_value()) << family["name"];
    EXPECT_EQ(ChatStyleName(tmpl->style), family["name"].get<std::string>());
    EXPECT_EQ(tmpl->renders_bos, family["renders_bos"].get<bool>());
    EXPECT_EQ(tmpl->bos_token, family["bos_token"].get<std::string>());
    EXPECT_EQ(tmpl->eos_token, family["eos_token"].get<std::string>());
    for (const nlohmann::json& chat : family["chats"]) {
      const std::vector<ChatMessage> messages = Messages(chat["messages"]);
      if (chat["rendered"].is_null()) {
        EXPECT_THROW(RenderChat(*tmpl, messages, chat["add_generation_prompt"]), Error)
            << family["name"] << " " << chat["messages"].dump();
        continue;
      }
      EXPECT_EQ(RenderChat(*tmpl, messages, chat["add_generation_prompt"]),
                chat["rendered"].get<std::string>())
          << family["name"] << " " << chat["messages"].dump();
    }
  }
}

// --chat-template NAME renders as the family's real template does (the jinja2 goldens).
TEST(ChatTemplateTest, NamedTemplatesRenderAsTheirFamilies) {
  const nlohmann::json golden = testing::LoadGolden("tokenizer_chat.json");
  for (const nlohmann::json& family : golden["families"]) {
    const std::optional<ChatTemplate> tmpl =
        NamedChatTemplate(family["name"].get<std::string>());
    ASSERT_TRUE(tmpl.has_value()) << family["name"];
    EXPECT_EQ(tmpl->renders_bos, family["renders_bos"].get<bool>()) << family["name"];
    EXPECT_EQ(tmpl->bos_token, family["bos_token"].get<std::string>()) << family["name"];
    EXPECT_EQ(tmpl->eos_token, family["eos_token"].get<std::string>()) << family["name"];
    for (const nlohmann::json& chat : family["chats"]) {
      if (chat["rendered"].is_null()) continue;
      EXPECT_EQ(RenderChat(*tmpl, Messages(chat["messages"]), chat["add_generation_prompt"]),
                chat["rendered"].get<std::string>())
          << family["name"] << " " << chat["messages"].dump();
    }
  }
  const std::optional<ChatTemplate> chatml = NamedChatTemplate("chatml");
  ASSERT_TRUE(chatml.has_value());
  EXPECT_EQ(RenderChat(*chatml, {{"user", "hi"}}, true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(NamedChatTemplate("vicuna").has_value());
}

TEST(ChatTemplateTest, UnknownTemplatesAreNotGuessed) {
  EXPECT_FALSE(ParseChatTemplate("").has_value());
  EXPECT_FALSE(ParseChatTemplate("{% for m in messages %}<|usr|>{{ m.content }}{% endfor %}"));
  // Llama 3.1+ (dated system block) and Mistral-style [INST] without <<SYS>>.
  EXPECT_FALSE(ParseChatTemplate("<|start_header_id|>system<|end_header_id|>\\n\\n"
                                 "Cutting Knowledge Date: December 2023"));
  EXPECT_FALSE(ParseChatTemplate("{{ bos_token }}[INST] {{ m['content'] }} [/INST]"));
}

}  // namespace
}  // namespace qevict
