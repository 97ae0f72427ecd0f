// One table per enum: every value beside its label, in value order. The label, the list of values,
// the count and the lookup by label all come from it, so a value is added in one line, and a
// static_assert(IsDense(table)) at the table proves every value 0..N-1 is there once, in order.
#ifndef KVLEDGER_LIB_BASE_ENUM_TABLE_H_
#define KVLEDGER_LIB_BASE_ENUM_TABLE_H_

#include <array>
#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace kvledger {

template <typename E>
struct EnumLabel {
  E value;
  const char* label;
};

template <typename E, size_t N>
using EnumTable = std::array<EnumLabel<E>, N>;

// Row i holds the value i.
template <typename E, size_t N>
constexpr bool IsDense(const EnumTable<E, N>& table) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(table[i].value) != i) return false;
  }
  return true;
}

// The label of `value`, or `otherwise` for a value outside the table.
template <typename E, size_t N>
constexpr const char* LabelOf(const EnumTable<E, N>& table, E value, const char* otherwise = "") {
  const auto i = static_cast<size_t>(value);
  return i < N ? table[i].label : otherwise;
}

template <typename E, size_t N>
std::optional<E> ValueOf(const EnumTable<E, N>& table, absl::string_view label) {
  for (const EnumLabel<E>& row : table) {
    if (label == row.label) return row.value;
  }
  return std::nullopt;
}

template <typename E, size_t N>
constexpr std::array<E, N> ValuesOf(const EnumTable<E, N>& table) {
  std::array<E, N> values{};
  for (size_t i = 0; i < N; ++i) values[i] = table[i].value;
  return values;
}

}  // namespace kvledger

#endif  // KVLEDGER_LIB_BASE_ENUM_TABLE_H_
