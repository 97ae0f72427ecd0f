// The record codegen (lib/wire/record_codegen.h) on the real Record, and on messages it must refuse,
// built at run time in a pool over the generated one (so their fields can carry flag_help).
#include "lib/wire/record_codegen.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "gtest/gtest.h"
#include "kvledger/v1/record.pb.h"

namespace kvledger::codegen {
namespace {

using google::protobuf::FieldDescriptorProto;
using ::testing::HasSubstr;

// A message `Probe` in its own file, importing record.proto; `add` adds its fields.
class ProbeMessage {
 public:
  ProbeMessage() : pool_(google::protobuf::DescriptorPool::generated_pool()) {
    file_.set_name("probe.proto");
    file_.set_package("probe");
    file_.set_syntax("proto3");
    file_.add_dependency("kvledger/v1/record.proto");
    message_ = file_.add_message_type();
    message_->set_name("Probe");
    auto* nested = file_.add_message_type();
    nested->set_name("Part");
    Field(nested, "name", 1, FieldDescriptorProto::TYPE_STRING, "a name");
    Field(nested, "more", 2, FieldDescriptorProto::TYPE_INT64, "", FieldDescriptorProto::LABEL_REPEATED);
  }
  FieldDescriptorProto* Field(google::protobuf::DescriptorProto* message, const std::string& name, int number,
                              FieldDescriptorProto::Type type, const std::string& help,
                              FieldDescriptorProto::Label label = FieldDescriptorProto::LABEL_OPTIONAL) {
    FieldDescriptorProto* f = message->add_field();
    f->set_name(name);
    f->set_number(number);
    f->set_type(type);
    f->set_label(label);
    if (!help.empty()) f->mutable_options()->SetExtension(v1::flag_help, help);
    return f;
  }
  google::protobuf::DescriptorProto* message() { return message_; }
  const google::protobuf::Descriptor& Build() {
    const google::protobuf::FileDescriptor* file = pool_.BuildFile(file_);
    EXPECT_NE(file, nullptr);
    return *file->FindMessageTypeByName("Probe");
  }

 private:
  google::protobuf::DescriptorPool pool_;
  google::protobuf::FileDescriptorProto file_;
  google::protobuf::DescriptorProto* message_;
};

TEST(RecordCodegenTest, TheRecordMapsFieldByField) {
  const google::protobuf::Descriptor& record = *v1::Record::descriptor();
  EXPECT_EQ(RecordCodegenProblem(record), "");
  const std::string header = RecordFactsHeader(record);
  EXPECT_THAT(header, HasSubstr("  std::optional<double> queue_seconds;  // unset: not reported\n"));
  EXPECT_THAT(header, HasSubstr("  int tier_value = 0;  // kvledger.v1.Tier, raw\n"));
  EXPECT_THAT(header, HasSubstr("  absl::Span<const uint64_t> prefix_block_ids;\n"));
  EXPECT_THAT(header, HasSubstr("  std::vector<StateBoundaryFact> state_boundaries;\n"));
  EXPECT_THAT(header, HasSubstr("inline constexpr int kRecordFieldCount = " + std::to_string(record.field_count())));
  EXPECT_THAT(header, HasSubstr("X(kInvalidQueueSeconds, \"invalid_queue_seconds\", \"queue_seconds\")"));
  const std::string source = RecordProtoSource(record);
  EXPECT_THAT(source, HasSubstr("  if (r.has_queue_seconds()) f.queue_seconds = r.queue_seconds();\n"));
  EXPECT_THAT(source, HasSubstr("  if (f.queue_seconds) r->set_queue_seconds(*f.queue_seconds);\n"));
  EXPECT_THAT(source, HasSubstr("  r->set_tier(static_cast<::kvledger::v1::Tier>(f.tier_value));\n"));
}

// A field the table has no mapping for (a repeated field inside a repeated message, a singular
// message, a repeated string) and a field without flag help are refused by name.
TEST(RecordCodegenTest, AFieldItCannotMapIsNamed) {
  {
    ProbeMessage probe;
    probe.Field(probe.message(), "x_seconds", 1, FieldDescriptorProto::TYPE_DOUBLE, "x latency")->set_proto3_optional(true);
    probe.message()->add_oneof_decl()->set_name("_x_seconds");
    probe.message()->mutable_field(0)->set_oneof_index(0);
    probe.Field(probe.message(), "parts", 2, FieldDescriptorProto::TYPE_MESSAGE, "parts",
                FieldDescriptorProto::LABEL_REPEATED)->set_type_name(".probe.Part");
    const google::protobuf::Descriptor& repeated_inside = probe.Build();
    EXPECT_EQ(RecordCodegenProblem(repeated_inside), "probe.Part.more: a repeated message's fields must be singular scalars or strings");
  }
  {
    ProbeMessage probe;
    probe.Field(probe.message(), "x_seconds", 1, FieldDescriptorProto::TYPE_DOUBLE, "x latency");
    probe.Field(probe.message(), "part", 2, FieldDescriptorProto::TYPE_MESSAGE, "one part")->set_type_name(".probe.Part");
    EXPECT_THAT(RecordCodegenProblem(probe.Build()), HasSubstr("probe.Probe.part: no facts mapping for this shape"));
  }
  {
    ProbeMessage probe;
    probe.Field(probe.message(), "x_seconds", 1, FieldDescriptorProto::TYPE_DOUBLE, "");
    EXPECT_THAT(RecordCodegenProblem(probe.Build()), HasSubstr("probe.Probe.x_seconds: no [(flag_help) = \"...\"]"));
  }
  {
    ProbeMessage probe;
    probe.Field(probe.message(), "names", 1, FieldDescriptorProto::TYPE_STRING, "names",
                FieldDescriptorProto::LABEL_REPEATED);
    EXPECT_THAT(RecordCodegenProblem(probe.Build()), HasSubstr("probe.Probe.names: no facts mapping"));
  }
}

// A message it can map: an optional latency and a repeated message of scalars, both ways.
TEST(RecordCodegenTest, ANewInputIsMappedBothWays) {
  ProbeMessage probe;
  probe.Field(probe.message(), "x_seconds", 1, FieldDescriptorProto::TYPE_DOUBLE, "x latency")->set_proto3_optional(true);
  probe.message()->add_oneof_decl()->set_name("_x_seconds");
  probe.message()->mutable_field(0)->set_oneof_index(0);
  const google::protobuf::Descriptor& message = probe.Build();
  ASSERT_EQ(RecordCodegenProblem(message), "");
  EXPECT_THAT(RecordFactsHeader(message), HasSubstr("  std::optional<double> x_seconds;  // unset: not reported\n"));
  EXPECT_THAT(RecordFactsHeader(message), HasSubstr("X(kInvalidXSeconds, \"invalid_x_seconds\", \"x_seconds\")"));
  EXPECT_THAT(RecordProtoSource(message), HasSubstr("  if (r.has_x_seconds()) f.x_seconds = r.x_seconds();\n"));
}

}  // namespace
}  // namespace kvledger::codegen
