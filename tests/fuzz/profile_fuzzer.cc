// libFuzzer target: arbitrary bytes as a ProfileCatalog (what a --profiles file holds) through
// validation and cost-model derivation, then one record costed with every accepted profile.
#include <cstdint>
#include <cstdlib>

#include "google/protobuf/stubs/logging.h"
#include "kvledger/v1/profile.pb.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/profile_catalog.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // parse failures are expected; keep the output readable
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvledger::v1::ProfileCatalog overrides;
  if (!overrides.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto catalog = kvledger::ProfileCatalog::Make(overrides);
  if (!catalog.ok()) {
    if (catalog.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  for (const auto& name : catalog->Names()) {
    kvledger::RecordFacts facts;
    facts.model = name;
    facts.tier_value = 1;
    facts.prompt_tokens = int64_t{1} << 31;
    facts.logical_match_tokens = facts.prompt_tokens - 1;
    facts.suffix_prefill_seconds = 1;
    const kvledger::RecordFigures d = kvledger::Derive(facts, *catalog->Find(name));
    if (d.attention_avoided_flops[0] > d.attention_baseline_flops) std::abort();
    if (d.prefill_avoided_flops[0] > d.prefill_baseline_flops) std::abort();
  }
  return 0;
}
