// libFuzzer target: arbitrary bytes as a RecordBatchRequest through the whole record path
// (validate, resolve, derive, aggregate, explain). Proves under ASan/UBSan that no input crashes,
// and checks that every record is either counted once or rejected with a reason.
#include <cstdint>
#include <cstdlib>

#include "google/protobuf/stubs/logging.h"
#include "kvledger/v1/ledger.pb.h"
#include "lib/accounting/ledger.h"
#include "lib/wire/record_proto.h"
#include "lib/profiles/profile_catalog.h"

namespace {

struct World {
  kvledger::ProfileCatalog catalog = kvledger::ProfileCatalog::Builtin();
  kvledger::ModelRegistry registry{catalog, 8, kvledger::UnknownModelPolicy::kGeneric};
  kvledger::Aggregator aggregator{registry.labels().label_slots()};
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
  if (!batch.ParseFromArray(data, static_cast<int>(size))) return 0;
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
