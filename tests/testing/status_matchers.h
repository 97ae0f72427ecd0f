// StatusIs(code, message_matcher): the project's one matcher for absl::Status / StatusOr results
// (Debian's Abseil 20220623 ships none).
#ifndef KVLEDGER_TESTS_TESTING_STATUS_MATCHERS_H_
#define KVLEDGER_TESTS_TESTING_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace kvledger::testing {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) { return status_or.status(); }

MATCHER_P2(StatusIs, code, message_matcher,
           absl::StrCat("has code ", absl::StatusCodeToString(code))) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(status.message()), result_listener);
}

MATCHER(IsOk, "is OK") {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.ok();
}

}  // namespace kvledger::testing

#endif  // KVLEDGER_TESTS_TESTING_STATUS_MATCHERS_H_
