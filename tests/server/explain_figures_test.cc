// Explain's one description (the Explain rows of lib/accounting/figure_schema.h) held to the wire
// message: every DerivedFigures and GroupFigures field is exactly one row, every row's value fits its
// field's type, the wire carries each row's value unchanged (unset where the row has none), and the
// figures the rows compute agree with hand arithmetic.
#include "lib/accounting/figure_schema.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/model_registry.h"
#include "lib/profiles/profile_catalog.h"
#include "lib/wire/record_proto.h"
#include "tests/testing/records.h"

namespace kvledger {
namespace {

// Every singular field of `message` as a row would name it, a message field's fields as
// "parent.field"; `skip` are the fields no row describes.
std::multiset<std::string> FieldPaths(const google::protobuf::Descriptor& message, const std::set<std::string>& skip) {
  std::multiset<std::string> paths;
  for (int i = 0; i < message.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& f = *message.field(i);
    if (skip.count(f.name()) != 0) continue;
    if (f.message_type() == nullptr) {
      paths.insert(f.name());
      continue;
    }
    for (int j = 0; j < f.message_type()->field_count(); ++j) {
      paths.insert(absl::StrCat(f.name(), ".", f.message_type()->field(j)->name()));
    }
  }
  return paths;
}

template <typename Row>
std::multiset<std::string> RowPaths(absl::Span<const Row> rows) {
  std::multiset<std::string> paths;
  for (const Row& row : rows) paths.insert(row.field);
  return paths;
}

TEST(ExplainFiguresTest, EveryFieldIsExactlyOneRow) {
  EXPECT_EQ(RowPaths(ExplainFigures()), FieldPaths(*v1::DerivedFigures::descriptor(), {"model", "groups"}));
  EXPECT_EQ(RowPaths(ExplainGroupColumns()), FieldPaths(*v1::GroupFigures::descriptor(), {}));
}

// A share is of a double field, a gate is a bool field, and every row has a label.
template <typename Row>
void ExpectRowsWellFormed(absl::Span<const Row> rows, const google::protobuf::Descriptor& message) {
  using F = google::protobuf::FieldDescriptor;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.field);
    EXPECT_NE(FindExplainField(message, row.field).field, nullptr);
    EXPECT_GT(std::string(row.label).size(), 0u);
    EXPECT_GT(std::string(row.when_unset).size(), 0u);
    if (row.share_of != nullptr) {
      const F* whole = FindExplainField(message, row.share_of).field;
      ASSERT_NE(whole, nullptr);
      EXPECT_EQ(whole->cpp_type(), F::CPPTYPE_DOUBLE);
    }
    if (row.only_if != nullptr) {
      const F* gate = FindExplainField(message, row.only_if).field;
      ASSERT_NE(gate, nullptr);
      EXPECT_EQ(gate->cpp_type(), F::CPPTYPE_BOOL);
    }
  }
}

TEST(ExplainFiguresTest, SharesAndGatesNameFieldsOfTheirType) {
  ExpectRowsWellFormed(ExplainFigures(), *v1::DerivedFigures::descriptor());
  ExpectRowsWellFormed(ExplainGroupColumns(), *v1::GroupFigures::descriptor());
  EXPECT_EQ(FindExplainField(*v1::DerivedFigures::descriptor(), "groups.name").field, nullptr);  // repeated
  EXPECT_EQ(FindExplainField(*v1::DerivedFigures::descriptor(), "no_such_field").field, nullptr);
}

class ExplainRecordsTest : public ::testing::Test {
 protected:
  // A host hit with every whole-request input and a prediction; a hybrid model's record with its
  // groups' boundaries reported; a miss.
  void SetUp() override {
    v1::Record whole = testing::HitRecord("llama-3.1-8b", 8192, 4096, v1::TIER_HOST);
    whole.set_reload_seconds(0.02);
    whole.set_suffix_prefill_seconds(0.3);
    whole.set_ttft_seconds(0.5);
    whole.set_queue_seconds(0.1);
    whole.set_output_tokens(201);
    whole.set_decode_seconds(4);
    whole.set_predicted_match_tokens(5000);
    v1::Record hybrid = testing::HitRecord("kimi-linear-48b-a3b", 2000, 1000, v1::TIER_HOST);
    for (const auto& [group, tokens] : {std::pair{"kda", 768}, std::pair{"mla", 992}}) {
      v1::StateBoundary* b = hybrid.add_state_boundaries();
      b->set_state_group(group);
      b->set_boundary_tokens(tokens);
    }
    v1::Record miss = testing::HitRecord("llama-3.1-8b", 100, 0, v1::TIER_UNSPECIFIED);
    for (const v1::Record& r : {whole, hybrid, miss}) {
      records_.push_back(r);
      auto figures = Evaluate(FactsFromProto(records_.back()), registry_, OfflineEstimateSource());
      ASSERT_TRUE(figures.ok()) << figures.rejection().message;
      figures_.push_back(*figures);
    }
  }

  ProfileCatalog catalog_ = ProfileCatalog::Builtin();
  ModelRegistry registry_{catalog_, 8, UnknownModelPolicy::kReject};
  std::vector<v1::Record> records_;
  std::vector<RecordFigures> figures_;
};

// The wire holds what each row computes, and leaves unset what it does not; across the three
// records every row is set at least once, so every value's type has met its field.
TEST_F(ExplainRecordsTest, TheWireCarriesEveryRowUnchanged) {
  std::map<std::string, int> set_count;
  for (size_t i = 0; i < figures_.size(); ++i) {
    const v1::DerivedFigures p = FiguresToProto(figures_[i], records_[i].model());
    std::string scratch;
    const absl::Span<const ExplainFigure> rows = ExplainFigures();
    for (size_t r = 0; r < rows.size(); ++r) {
      const ExplainFigure& row = rows[r];
      const ExplainFieldPath& path = ExplainFigurePaths()[r];
      SCOPED_TRACE(absl::StrCat(records_[i].model(), " ", row.field));
      ASSERT_EQ(path.field, FindExplainField(*p.GetDescriptor(), row.field).field);
      const std::optional<ExplainValue> want = row.value(figures_[i]);
      const std::optional<ExplainValue> got = GetExplainValue(p, path, &scratch);
      if (want) {
        EXPECT_TRUE(FieldTakes(*path.field, *want));
        ++set_count[row.field];
      }
      // A field without presence reads back its zero when the row has no value.
      if (want || path.field->has_presence()) {
        EXPECT_EQ(got, want);
      }
    }
    ASSERT_EQ(p.groups_size(), static_cast<int>(figures_[i].groups.size()));
    const absl::Span<const ExplainGroupColumn> columns = ExplainGroupColumns();
    for (int g = 0; g < p.groups_size(); ++g) {
      for (size_t c = 0; c < columns.size(); ++c) {
        const std::optional<ExplainValue> want = columns[c].value(figures_[i].groups[static_cast<size_t>(g)]);
        EXPECT_EQ(GetExplainValue(p.groups(g), ExplainGroupColumnPaths()[c], &scratch), want) << columns[c].field;
        if (want) ++set_count[absl::StrCat("groups.", columns[c].field)];
      }
    }
  }
  for (const ExplainFigure& row : ExplainFigures()) EXPECT_GT(set_count[row.field], 0) << row.field;
  for (const ExplainGroupColumn& column : ExplainGroupColumns()) {
    EXPECT_GT(set_count[absl::StrCat("groups.", column.field)], 0) << column.field;
  }
}

// docs/cost-model.md §12 by hand for the whole record: TTFT + decode = 4.5 s; the prefill as served
// is reload + suffix = 0.32 s of it; 200 decode steps in 4 s are 20 ms a token, 50 tokens/s.
TEST_F(ExplainRecordsTest, WholeRequestRatiosByHand) {
  const v1::DerivedFigures p = FiguresToProto(figures_[0], "llama-3.1-8b");
  EXPECT_DOUBLE_EQ(p.e2e_seconds(), 4.5);
  EXPECT_DOUBLE_EQ(p.prefill_share_of_e2e(), 0.32 / 4.5);
  EXPECT_DOUBLE_EQ(p.time_per_output_token_seconds(), 0.02);
  EXPECT_DOUBLE_EQ(p.output_tokens_per_second(), 50);
  EXPECT_DOUBLE_EQ(p.ttft_speedup(), p.ttft_without_reuse_seconds() / 0.5);
  EXPECT_DOUBLE_EQ(p.kv_bytes_held_average(), p.kv_byte_seconds() / 4.5);
  EXPECT_DOUBLE_EQ(p.ttft_parts().queue_seconds() + p.ttft_parts().reload_seconds() +
                       p.ttft_parts().suffix_prefill_seconds() + p.ttft_parts().rest_seconds(),
                   0.5);
  EXPECT_EQ(p.recoverable_source(), v1::BOUNDARY_SOURCE_MODEL);
  EXPECT_EQ(p.estimate_basis(), v1::BASIS_RECORD);
  EXPECT_EQ(p.profile(), "llama-3.1-8b");
  // min(5000, 4096) realised, 904 over, nothing under.
  EXPECT_EQ((std::vector<int64_t>{p.predicted_match_tokens(), p.prediction_realised_tokens(),
                                  p.prediction_over_tokens(), p.prediction_under_tokens()}),
            (std::vector<int64_t>{5000, 4096, 904, 0}));
  EXPECT_DOUBLE_EQ(p.alpha_logical(), 0.5);
  EXPECT_DOUBLE_EQ(p.attention_speedup(), 1 / p.attention_remaining_fraction());

  const v1::DerivedFigures hybrid = FiguresToProto(figures_[1], "kimi-linear-48b-a3b");
  EXPECT_EQ(hybrid.recoverable_source(), v1::BOUNDARY_SOURCE_STATE_BOUNDARIES);
  ASSERT_EQ(hybrid.groups_size(), 3);
  EXPECT_EQ(hybrid.groups(1).name(), "kda");
  EXPECT_EQ(hybrid.groups(1).reported_boundary_tokens(), 768);
  const v1::DerivedFigures miss = FiguresToProto(figures_[2], "llama-3.1-8b");
  EXPECT_FALSE(miss.has_predicted_match_tokens());
  EXPECT_FALSE(miss.has_ttft_parts());  // no queue_seconds
}

}  // namespace
}  // namespace kvledger
