// libFuzzer target: arbitrary bytes as a RecordBatchRequest through the whole record path
// (validate, resolve, derive, aggregate, explain). Proves under ASan/UBSan that no input crashes,
// and checks that every record is either counted once or rejected with a reason, and that the wire
// count the server admits requests by (lib/wire/wire_budget) agrees with the parser: whatever parses
// is well formed to it, with as many records as the parser found.
#include <cstdint>
#include <cstdlib>

#include "absl/strings/match.h"
#include "google/protobuf/stubs/logging.h"
#include "kvledger/v1/ledger.pb.h"
#include "lib/accounting/ledger.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "lib/wire/record_proto.h"
#include "lib/wire/wire_budget.h"
#include "lib/profiles/profile_catalog.h"

namespace {

struct World {
  kvledger::ProfileCatalog catalog = kvledger::ProfileCatalog::Builtin();
  kvledger::ModelRegistry registry{catalog, 8, kvledger::UnknownModelPolicy::kGeneric};
  kvledger::Aggregator aggregator{registry.slots().slot_count()};
  kvledger::Ledger ledger{registry, aggregator};
  uint64_t accepted = 0;
  uint64_t rejected = 0;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // parse failures are expected; keep the output readable
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();
  kvledger::v1::RecordBatchRequest batch;
  kvledger::WireLimits limits;
  limits.type = kvledger::v1::RecordBatchRequest::descriptor();
  limits.entry_fields[0] = kvledger::v1::RecordBatchRequest::kRecordsFieldNumber;
  limits.max_entries = 1u << 20;
  kvledger::WireCount count;
  google::protobuf::io::ArrayInputStream input(data, static_cast<int>(size));
  const absl::Status wire = kvledger::CountWire(&input, limits, &count);
  const bool well_formed = wire.ok();
  if (!batch.ParseFromArray(data, static_cast<int>(size))) return 0;
  // Groups parse but are refused by the wire count on purpose (proto3 never sends them).
  if (absl::StrContains(wire.message(), "carries a group")) return 0;
  if (!well_formed || count.entries != static_cast<size_t>(batch.records_size())) std::abort();
  if (count.parts < static_cast<size_t>(batch.records_size())) std::abort();
  for (const auto& record : batch.records()) {
    const kvledger::RecordFacts facts = kvledger::FactsFromProto(record);
    auto explained = kvledger::Evaluate(facts, world->registry);
    if (explained.ok()) (void)kvledger::FiguresToProto(*explained, record.model());
    const kvledger::Verdict verdict = world->ledger.Record(facts);
    if (verdict.ok() != explained.ok()) std::abort();  // Explain and Record must agree
    if (verdict.ok()) {
      ++world->accepted;
    } else {
      if (verdict.rejection().reason != explained.rejection().reason) std::abort();
      if (verdict.rejection().message.empty()) std::abort();
      ++world->rejected;
    }
  }
  const kvledger::AggregateSnapshot snapshot = world->aggregator.Snapshot();
  uint64_t counted = 0, rejected = 0;
  for (const auto& cell : snapshot.cells) counted += cell.totals.requests();
  for (uint64_t r : snapshot.rejected) rejected += r;
  if (counted != world->accepted || rejected != world->rejected) std::abort();  // nothing lost
  return 0;
}
