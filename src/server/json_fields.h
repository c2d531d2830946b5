// Typed access to fields of a parsed JSON request. Each getter throws RequestRejected (an
// ApiError naming the field) when the value has the wrong type or range; the request parsers
// catch it at their boundary and return the error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"

namespace qevict::server {

struct RequestRejected {
  ApiError error;
};

[[noreturn]] void Reject(std::string message, std::string param, std::string code = "");

// The field's value, or nullptr when absent or null (null means "use the default" in OpenAI's API).
const nlohmann::json* OptionalField(const nlohmann::json& object, const char* key);

const char* JsonTypeName(const nlohmann::json& value);
std::string GetString(const nlohmann::json& value, const std::string& param);
bool GetBool(const nlohmann::json& value, const std::string& param);
double GetNumber(const nlohmann::json& value, const std::string& param);
// Integers; a float with an integral value (e.g. 16.0) is accepted.
int64_t GetInteger(const nlohmann::json& value, const std::string& param);
int64_t GetIntegerIn(const nlohmann::json& value, const std::string& param, int64_t lo, int64_t hi);
double GetNumberIn(const nlohmann::json& value, const std::string& param, double lo, double hi);

}  // namespace qevict::server
