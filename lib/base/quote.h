// How every message quotes a value someone sent: in double quotes, C-escaped (so control bytes and
// invalid UTF-8 print as escapes) and cut at 64 bytes ("..." after the cut), so a hostile value can
// neither break a log line nor flood it.
#ifndef KVLEDGER_LIB_BASE_QUOTE_H_
#define KVLEDGER_LIB_BASE_QUOTE_H_

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kvledger {

inline constexpr size_t kMaxQuotedBytes = 64;

inline std::string Quoted(absl::string_view value) {
  const bool cut = value.size() > kMaxQuotedBytes;
  return absl::StrCat("\"", absl::CHexEscape(value.substr(0, kMaxQuotedBytes)), cut ? "...\"" : "\"");
}

}  // namespace kvledger

#endif  // KVLEDGER_LIB_BASE_QUOTE_H_
