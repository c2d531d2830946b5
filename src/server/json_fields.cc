#include "server/json_fields.h"

#include <cmath>
#include <limits>
#include <utility>

namespace qevict::server {

void Reject(std::string message, std::string param, std::string code) {
  throw RequestRejected{InvalidRequest(std::move(message), std::move(param), std::move(code))};
}

const nlohmann::json* OptionalField(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

const char* JsonTypeName(const nlohmann::json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

namespace {
[[noreturn]] void WrongType(const nlohmann::json& value, const std::string& param,
                            const char* expected) {
  Reject("'" + param + "' must be " + expected + ", got " + JsonTypeName(value), param,
         "invalid_type");
}

std::string FormatNumber(double x) {
  std::string s = std::to_string(x);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}
}  // namespace

std::string GetString(const nlohmann::json& value, const std::string& param) {
  if (!value.is_string()) WrongType(value, param, "a string");
  return value.get<std::string>();
}

bool GetBool(const nlohmann::json& value, const std::string& param) {
  if (!value.is_boolean()) WrongType(value, param, "a boolean");
  return value.get<bool>();
}

double GetNumber(const nlohmann::json& value, const std::string& param) {
  if (!value.is_number()) WrongType(value, param, "a number");
  const double x = value.get<double>();
  if (!std::isfinite(x)) {
    Reject("'" + param + "' must be a finite number, got " + value.dump(), param, "invalid_value");
  }
  return x;
}

int64_t GetInteger(const nlohmann::json& value, const std::string& param) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Reject("'" + param + "' is too large: " + value.dump() + " is over " +
                 std::to_string(std::numeric_limits<int64_t>::max()),
             param, "invalid_value");
    }
    return value.get<int64_t>();
  }
  if (value.is_number_float()) {
    const double x = value.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e15) {
      return static_cast<int64_t>(x);
    }
  }
  WrongType(value, param, "an integer");
}

int64_t GetIntegerIn(const nlohmann::json& value, const std::string& param, int64_t lo,
                     int64_t hi) {
  const int64_t x = GetInteger(value, param);
  if (x < lo || x > hi) {
    Reject("'" + param + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
               "], got " + std::to_string(x),
           param, "invalid_value");
  }
  return x;
}

double GetNumberIn(const nlohmann::json& value, const std::string& param, double lo, double hi) {
  const double x = GetNumber(value, param);
  if (x < lo || x > hi) {
    Reject("'" + param + "' must be in [" + FormatNumber(lo) + ", " + FormatNumber(hi) + "], got " +
               FormatNumber(x),
           param, "invalid_value");
  }
  return x;
}

}  // namespace qevict::server
