#include "server/tokenize_handler.h"

#include "server/json_fields.h"
#include "server/request.h"

namespace qevict::server {
using nlohmann::json;

std::variant<json, ApiError> TokenizeRequest(const Tokenizer& tokenizer, std::string_view body) {
  try {
    const json request = ParseRequestBody(body);
    const json* content = OptionalField(request, "content");
    if (content == nullptr) Reject("'content' is required", "content", "missing_field");
    const std::string text = GetString(*content, "content");
    bool add_special = false;
    bool parse_special = true;
    if (const json* v = OptionalField(request, "add_special")) add_special = GetBool(*v, "add_special");
    if (const json* v = OptionalField(request, "parse_special")) {
      parse_special = GetBool(*v, "parse_special");
    }
    return json{{"tokens", tokenizer.Encode(text, add_special, parse_special)}};
  } catch (const RequestRejected& r) {
    return r.error;
  }
}

std::variant<json, ApiError> DetokenizeRequest(const Tokenizer& tokenizer, std::string_view body) {
  try {
    const json request = ParseRequestBody(body);
    const json* tokens = OptionalField(request, "tokens");
    if (tokens == nullptr || !tokens->is_array()) {
      Reject("'tokens' must be an array of token ids", "tokens", "invalid_type");
    }
    std::vector<TokenId> ids;
    ids.reserve(tokens->size());
    for (size_t i = 0; i < tokens->size(); ++i) {
      ids.push_back(static_cast<TokenId>(GetIntegerIn((*tokens)[i], "tokens[" + std::to_string(i) + "]",
                                                      0, tokenizer.vocab_size() - 1)));
    }
    return json{{"content", tokenizer.Decode(ids, /*render_special=*/true)}};
  } catch (const RequestRejected& r) {
    return r.error;
  }
}

}  // namespace qevict::server
