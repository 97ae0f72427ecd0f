// Every field of kvledger.v1.Record reaches the server's facts: each one is set through reflection (so
// a field added to record.proto is set here without this test changing), the record goes through
// FactsFromProto, the view every record path reads, and back through FactsToProto, and must come back
// whole. A field the conversion forgets fails here, naming it, instead of being dropped in silence
// behind the CLI and the HTTP API, which offer every field from the same descriptor.
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "kvledger/v1/record.pb.h"
#include "lib/wire/record_proto.h"

namespace kvledger {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// A value of the field's type that no other field gets (its number in it), set or added once.
void SetDistinct(Message& message, const FieldDescriptor& field, int salt) {
  const Reflection& r = *message.GetReflection();
  const int n = field.number() * 100 + salt;
  const bool rep = field.is_repeated();
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      rep ? r.AddString(&message, &field, absl::StrCat("v", n)) : r.SetString(&message, &field, absl::StrCat("v", n));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      rep ? r.AddInt64(&message, &field, n) : r.SetInt64(&message, &field, n);
      break;
    case FieldDescriptor::CPPTYPE_INT32:
      rep ? r.AddInt32(&message, &field, n) : r.SetInt32(&message, &field, n);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      rep ? r.AddUInt64(&message, &field, n) : r.SetUInt64(&message, &field, n);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      rep ? r.AddUInt32(&message, &field, n) : r.SetUInt32(&message, &field, n);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      rep ? r.AddDouble(&message, &field, n + 0.25) : r.SetDouble(&message, &field, n + 0.25);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      rep ? r.AddBool(&message, &field, true) : r.SetBool(&message, &field, true);
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* last = field.enum_type()->value(field.enum_type()->value_count() - 1);
      rep ? r.AddEnum(&message, &field, last) : r.SetEnum(&message, &field, last);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      Message* inner = rep ? r.AddMessage(&message, &field) : r.MutableMessage(&message, &field);
      for (int i = 0; i < inner->GetDescriptor()->field_count(); ++i) {
        SetDistinct(*inner, *inner->GetDescriptor()->field(i), salt);
      }
      break;
    }
    default:
      ADD_FAILURE() << field.full_name() << ": a type this test does not set; teach SetDistinct it";
  }
}

TEST(RecordRoundTripTest, EveryRecordFieldReachesTheFactsAndComesBack) {
  v1::Record record;
  const auto& descriptor = *v1::Record::descriptor();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    SetDistinct(record, field, 1);
    if (field.is_repeated()) SetDistinct(record, field, 2);  // two elements: order and count both kept
  }
  for (int i = 0; i < descriptor.field_count(); ++i) {  // nothing left at its default by the setting
    const FieldDescriptor& field = *descriptor.field(i);
    EXPECT_TRUE(field.is_repeated() ? record.GetReflection()->FieldSize(record, &field) == 2
                                    : record.GetReflection()->HasField(record, &field))
        << field.name();
  }
  const v1::Record back = FactsToProto(FactsFromProto(record));
  google::protobuf::util::MessageDifferencer differ;
  std::string differences;
  differ.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differ.Compare(record, back))
      << "fields lost or changed between the wire and the facts (lib/wire/record_proto.cc):\n"
      << differences;
}

// The check itself can fail: a record whose field the facts do not carry (an unknown field, which
// no conversion keeps) does not come back equal.
TEST(RecordRoundTripTest, ALostFieldIsNamed) {
  v1::Record record;
  record.set_model("m");
  record.GetReflection()->MutableUnknownFields(&record)->AddVarint(999, 1);
  google::protobuf::util::MessageDifferencer differ;
  EXPECT_FALSE(differ.Compare(record, FactsToProto(FactsFromProto(record))));
}

}  // namespace
}  // namespace kvledger
