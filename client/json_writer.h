// A flat JSON object writer for CLI output: shortest round-trip doubles, exact 128-bit integers,
// null for absent values.
#ifndef KVLEDGER_CLIENT_JSON_WRITER_H_
#define KVLEDGER_CLIENT_JSON_WRITER_H_

#include <charconv>
#include <optional>
#include <string>

#include "lib/cost_model/exact_int.h"

namespace kvledger::cli {

class JsonObject {
 public:
  JsonObject& Number(const char* key, double value) {
    char buffer[64];
    auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return Raw(key, std::string(buffer, result.ptr));
  }
  JsonObject& Number(const char* key, const std::optional<double>& value) {
    return value ? Number(key, *value) : Raw(key, "null");
  }
  JsonObject& Integer(const char* key, Uint128 value) { return Raw(key, Uint128ToString(value)); }
  JsonObject& Bool(const char* key, bool value) { return Raw(key, value ? "true" : "false"); }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  JsonObject& Raw(const char* key, const std::string& value) {
    if (!body_.empty()) body_ += ", ";
    body_ += "\"" + std::string(key) + "\": " + value;
    return *this;
  }
  std::string body_;
};

}  // namespace kvledger::cli

#endif  // KVLEDGER_CLIENT_JSON_WRITER_H_
