// OpenAI-style errors: an HTTP status plus {"error": {"message", "type", "param", "code"}}.
// Every failure the server reports (bad request, unknown route, busy, internal) is one of these.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace qevict::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending request field, "" when none (serialized as null)
  std::string code;   // a machine-readable reason, "" when none (serialized as null)

  nlohmann::json ToJson() const;
  std::string Body() const;  // ToJson() serialized
};

ApiError InvalidRequest(std::string message, std::string param = "", std::string code = "");
ApiError NotFound(std::string message);
ApiError Unauthorized(std::string message);  // 401 invalid_api_key
ApiError MethodNotAllowed(std::string message);
ApiError PayloadTooLarge(std::string message);
ApiError ServiceUnavailable(std::string message, std::string code);
ApiError InternalError(std::string message);
// 507: the server has no room to store what the request needs (a session's cold tier).
ApiError InsufficientStorage(std::string message, std::string code);
// A JSON error for a status the HTTP library produced on its own (400, 413, 414, ...).
ApiError ErrorForStatus(int status);

// Serializes JSON for the wire; invalid UTF-8 (possible in generated text) becomes U+FFFD
// instead of throwing.
std::string DumpJson(const nlohmann::json& value);

}  // namespace qevict::server
