// libFuzzer target: arbitrary bytes as a RecordBatchRequest through the whole record path
// (validate, resolve, derive, aggregate, explain). Proves under ASan/UBSan that no input crashes,
// and checks that every record is either counted once (a record rebuilt from events, in the capacity
// curves only) or rejected with a reason, and that the wire
// count the server admits requests by (lib/wire/wire_budget) agrees with the parser: whatever parses
// is well formed to it, with as many records as the parser found. Records with prefix block ids go
// through the capacity curves, with bounds small enough that stacks renumber and forget: the curve
// never falls as the capacity grows (LRU inclusion), it replays no more records than were accepted
// with ids, and no second tier counts a record twice.
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/strings/match.h"
#include "google/protobuf/stubs/logging.h"
#include "kvledger/v1/ledger.pb.h"
#include "lib/accounting/ledger.h"
#include "lib/capacity/capacity_curves.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "lib/wire/record_proto.h"
#include "lib/wire/wire_budget.h"
#include "lib/profiles/profile_catalog.h"

namespace {

struct World {
  kvledger::ProfileCatalog catalog = kvledger::ProfileCatalog::Builtin();
  kvledger::ModelRegistry registry{catalog, 8, kvledger::UnknownModelPolicy::kGeneric};
  kvledger::Aggregator aggregator{registry.slots().slot_count()};
  std::unique_ptr<kvledger::CapacityCurves> curves =
      *kvledger::CapacityCurves::Create({16, 64, 256, 4096}, registry.slots().slot_count(), Limits());
  // Small stacks (they renumber and forget) and two second tiers below a device of 64 tokens.
  static kvledger::CurveLimits Limits() {
    kvledger::CurveLimits limits{/*max_caches=*/4, /*max_samples_per_cache=*/64};
    limits.tiers.sizes = *kvledger::ParseTierLadder("host:64MiB,disk:4GiB:1e9:0.001", "--capacity_tiers");
    limits.tiers.device_tokens = 64;
    return limits;
  }
  kvledger::Ledger ledger{registry, aggregator, nullptr, kvledger::LabelClaims::kClaim, {curves.get()}};
  uint64_t accepted = 0;  // served records (not rebuilt from events: those feed the curves only)
  uint64_t accepted_with_ids = 0;
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
      if (!kvledger::IsCurvesOnly(facts)) ++world->accepted;
      if (!facts.prefix_block_ids.empty() || !facts.prefix_block_reuse_distances.empty()) ++world->accepted_with_ids;
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
  uint64_t replayed = 0;
  for (const auto& curve : world->curves->Snapshot()) {
    replayed += curve.requests + curve.untracked;
    for (size_t i = 1; i < curve.rungs.size(); ++i) {
      if (curve.rungs[i].match_tokens < curve.rungs[i - 1].match_tokens) std::abort();
      if (curve.rungs[i].prefill_avoided_flops < curve.rungs[i - 1].prefill_avoided_flops) std::abort();
    }
    for (const kvledger::TierRung& tier : curve.tier_rungs) {  // a record hits a tier at most once
      if (tier[kvledger::kTierHitRequests] > curve.requests) std::abort();
      if (tier[kvledger::kTierSlowerRequests] > tier[kvledger::kTierSecondsKnown]) std::abort();
    }
  }
  if (replayed > world->accepted_with_ids) std::abort();
  return 0;
}
