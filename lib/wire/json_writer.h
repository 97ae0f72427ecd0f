// A JSON object writer for the CLI's --json output and the HTTP API: shortest round-trip doubles,
// exact 128-bit integers, null for absent values, nested objects and arrays of objects.
#ifndef KVLEDGER_LIB_WIRE_JSON_WRITER_H_
#define KVLEDGER_LIB_WIRE_JSON_WRITER_H_

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "lib/cost_model/exact_int.h"

namespace kvledger {

class JsonObject {
 public:
  JsonObject& Number(const char* key, double value) {
    if (!std::isfinite(value)) return Raw(key, "null");  // JSON has no inf or NaN
    char buffer[64];
    auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return Raw(key, std::string(buffer, result.ptr));
  }
  JsonObject& Number(const char* key, const std::optional<double>& value) {
    return value ? Number(key, *value) : Raw(key, "null");
  }
  JsonObject& Integer(const char* key, Uint128 value) { return Raw(key, Uint128ToString(value)); }
  JsonObject& Integer(const char* key, const std::optional<Uint128>& value) {
    return value ? Integer(key, *value) : Raw(key, "null");
  }
  JsonObject& Bool(const char* key, bool value) { return Raw(key, value ? "true" : "false"); }
  JsonObject& String(const char* key, absl::string_view value) { return Raw(key, Quoted(value)); }
  JsonObject& Null(const char* key) { return Raw(key, "null"); }
  JsonObject& Json(const char* key, const std::string& json) { return Raw(key, json); }  // already JSON
  JsonObject& Object(const char* key, const JsonObject& value) { return Raw(key, value.str()); }
  JsonObject& Array(const char* key, const std::vector<JsonObject>& values) {
    std::string out = "[";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + values[i].str();
    return Raw(key, out + "]");
  }
  std::string str() const { return "{" + body_ + "}"; }

  static std::string Quoted(absl::string_view value) {
    std::string out = "\"";
    for (unsigned char c : value) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
        out += escaped;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out + "\"";
  }

 private:
  JsonObject& Raw(const char* key, const std::string& value) {
    if (!body_.empty()) body_ += ", ";
    body_ += "\"" + std::string(key) + "\": " + value;
    return *this;
  }
  std::string body_;
};

}  // namespace kvledger

#endif  // KVLEDGER_CLIENT_JSON_WRITER_H_
