#include "server/api_error.h"

#include <utility>

namespace qevict::server {

nlohmann::json ApiError::ToJson() const {
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(s);
  };
  return {
      {"error",
       {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

std::string ApiError::Body() const { return DumpJson(ToJson()); }

ApiError InvalidRequest(std::string message, std::string param, std::string code) {
  return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

ApiError NotFound(std::string message) {
  return {404, std::move(message), "invalid_request_error", "", "not_found"};
}

ApiError Unauthorized(std::string message) {
  return {401, std::move(message), "invalid_request_error", "", "invalid_api_key"};
}

ApiError MethodNotAllowed(std::string message) {
  return {405, std::move(message), "invalid_request_error", "", "method_not_allowed"};
}

ApiError PayloadTooLarge(std::string message) {
  return {413, std::move(message), "invalid_request_error", "", "payload_too_large"};
}

ApiError ServiceUnavailable(std::string message, std::string code) {
  return {503, std::move(message), "server_error", "", std::move(code)};
}

ApiError InternalError(std::string message) {
  return {500, std::move(message), "server_error", "", "internal_error"};
}

ApiError InsufficientStorage(std::string message, std::string code) {
  return {507, std::move(message), "server_error", "", std::move(code)};
}

ApiError ErrorForStatus(int status) {
  switch (status) {
    case 400:
      return InvalidRequest("the HTTP request is malformed");
    case 404:
      return NotFound("not found");
    case 413:
      return PayloadTooLarge(
          "the request body exceeds the server's limit: send a shorter one, or "
          "restart the server with a larger --max-body");
    case 414:
      return {414, "the request URI is too long", "invalid_request_error", "", "uri_too_long"};
    case 416:
      return {416, "range not satisfiable", "invalid_request_error", "", ""};
    case 503:
      return ServiceUnavailable("the server is unavailable", "unavailable");
    default:
      break;
  }
  if (status >= 500) return {status, "server error", "server_error", "", ""};
  return {status, "request failed", "invalid_request_error", "", ""};
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace qevict::server
