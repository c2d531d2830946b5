// llama.cpp's server utilities: POST /tokenize {"content": TEXT, "add_special": false,
// "parse_special": true} -> {"tokens": [ids]}, and POST /detokenize {"tokens": [ids]} ->
// {"content": TEXT}. Pure functions from the body to a response or an ApiError.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <variant>

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace qevict::server {

std::variant<nlohmann::json, ApiError> TokenizeRequest(const Tokenizer& tokenizer,
                                                       std::string_view body);
std::variant<nlohmann::json, ApiError> DetokenizeRequest(const Tokenizer& tokenizer,
                                                         std::string_view body);

}  // namespace qevict::server
