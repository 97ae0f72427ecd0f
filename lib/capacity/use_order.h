// The order a request's blocks are used in after their lookup (docs/cost-model.md §14), which decides
// which of them an LRU cache evicts first:
// - kTailFirst (the default): as engines release a finished request's blocks — vLLM's block pool frees
//   them in reverse, SGLang's radix cache evicts leaves first — so the request's first block is the
//   most recently used and a chain leaves the cache from its tail;
// - kPrompt: in prompt order (the last block most recent), as simple LRU simulators replay a trace.
#ifndef KVLEDGER_LIB_CAPACITY_USE_ORDER_H_
#define KVLEDGER_LIB_CAPACITY_USE_ORDER_H_

#include <array>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "lib/base/quote.h"

namespace kvledger {

enum class UseOrder { kTailFirst, kPrompt };

inline constexpr std::array<absl::string_view, 2> kUseOrderNames = {"tail-first", "prompt"};

inline absl::string_view UseOrderName(UseOrder order) { return kUseOrderNames[static_cast<size_t>(order)]; }

// An order by its name; INVALID_ARGUMENT "FLAG = "TEXT": must be tail-first or prompt" otherwise.
inline absl::StatusOr<UseOrder> ParseUseOrder(absl::string_view flag, absl::string_view text) {
  for (size_t i = 0; i < kUseOrderNames.size(); ++i) {
    if (text == kUseOrderNames[i]) return static_cast<UseOrder>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " = ", Quoted(text), ": must be ", kUseOrderNames[0], " or ", kUseOrderNames[1]));
}

// Calls `use` with each of `n` positions in the order `order` uses them.
template <typename Use>
void ForEachInUseOrder(UseOrder order, size_t n, Use use) {
  for (size_t k = 0; k < n; ++k) use(order == UseOrder::kPrompt ? k : n - 1 - k);
}

}  // namespace kvledger

#endif  // KVLEDGER_LIB_CAPACITY_USE_ORDER_H_
