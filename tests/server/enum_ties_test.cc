// Every domain enumeration the wire carries by number is tied to its proto enumeration: the same
// numbers with the same names (the proto's value is the domain's label, upper-cased, after its
// prefix), so a value added to one side and not the other fails here, not on the wire.
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kvledger/v1/ledger.pb.h"
#include "kvledger/v1/record.pb.h"
#include "lib/accounting/compute_time.h"
#include "lib/accounting/derived_figures.h"
#include "lib/accounting/engine_stats.h"
#include "lib/accounting/record_facts.h"

namespace kvledger {
namespace {

// Each entry of `table` is the proto value `prefix` + its label upper-cased, at `number(entry)`; and
// the proto has no value the table lacks, besides `unspecified` ones.
template <typename Table, typename Number>
void ExpectTied(const Table& table, const google::protobuf::EnumDescriptor* proto, const std::string& prefix,
                Number number, int unspecified) {
  for (const auto& entry : table) {
    const auto* value = proto->FindValueByNumber(number(entry.value));
    ASSERT_NE(value, nullptr) << proto->name() << " has no value for " << entry.label;
    std::string expected = absl::StrCat(prefix, absl::AsciiStrToUpper(entry.label));
    if (std::string(entry.label) == "none" && proto->FindValueByName(expected) == nullptr) {
      expected = prefix + "UNSPECIFIED";  // the domain's "none" is the proto's unset value
    }
    EXPECT_EQ(value->name(), expected) << proto->name();
  }
  EXPECT_EQ(proto->value_count(), static_cast<int>(table.size()) + unspecified) << proto->name();
}

TEST(EnumTiesTest, DomainAndProtoAgree) {
  ExpectTied(kTierLabels, v1::Tier_descriptor(), "TIER_", [](Tier t) { return static_cast<int>(t); }, 0);
  // Tier::kNone is the proto's TIER_UNSPECIFIED (exported as tier="none").
  EXPECT_EQ(v1::Tier_descriptor()->FindValueByNumber(static_cast<int>(Tier::kNone))->name(), "TIER_UNSPECIFIED");
  ExpectTied(kBasisLabels, v1::Basis_descriptor(), "BASIS_", [](Basis b) { return static_cast<int>(b); }, 0);
  ExpectTied(kUnrecordedReasonLabels, v1::UnrecordedReason_descriptor(), "UNRECORDED_REASON_",
             [](UnrecordedReason r) { return static_cast<int>(r) + 1; }, 1);
  EXPECT_EQ(static_cast<int>(BoundarySourceKind::kEngine), v1::BOUNDARY_SOURCE_ENGINE);
  EXPECT_EQ(static_cast<int>(BoundarySourceKind::kStateBoundaries), v1::BOUNDARY_SOURCE_STATE_BOUNDARIES);
  EXPECT_EQ(static_cast<int>(BoundarySourceKind::kModel), v1::BOUNDARY_SOURCE_MODEL);
  EXPECT_EQ(v1::BoundarySource_descriptor()->value_count(), 4);
}

}  // namespace
}  // namespace kvledger
