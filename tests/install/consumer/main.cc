// Costs one prefix-cache hit in-process with the installed kvledger libraries, and counts it.
#include <cstdio>

#include "lib/accounting/aggregator.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/model_registry.h"
#include "lib/profiles/profile_catalog.h"

int main() {
  const kvledger::ProfileCatalog catalog = kvledger::ProfileCatalog::Builtin();
  kvledger::ModelRegistry registry(catalog, 8, kvledger::UnknownModelPolicy::kReject);
  kvledger::Aggregator aggregator(registry.slots().slot_count());
  kvledger::Ledger ledger(registry, aggregator);

  kvledger::RecordFacts hit;
  hit.model = "llama-3.1-8b";
  hit.tier_value = static_cast<int>(kvledger::Tier::kHost);
  hit.prompt_tokens = 4096;
  hit.logical_match_tokens = 2048;
  const auto figures = kvledger::Evaluate(hit, registry);
  if (!figures.ok()) return 1;
  const int reused = static_cast<int>(kvledger::Boundary::kReused);
  std::printf("reused_tokens=%llu attention_avoided_fraction=%.6f\n",
              static_cast<unsigned long long>(figures->reused_tokens),
              static_cast<double>(figures->attention_avoided_flops[reused]) /
                  static_cast<double>(figures->attention_baseline_flops));

  kvledger::RecordFacts bad = hit;
  bad.logical_match_tokens = 5000;
  const kvledger::Verdict verdict = ledger.Record(bad);
  if (verdict.ok()) return 1;
  std::printf("rejected %s: %s\n", kvledger::RejectReasonLabel(verdict.rejection().reason),
              verdict.rejection().message.c_str());
  if (!ledger.Record(hit).ok()) return 1;
  uint64_t counted = 0;
  for (const auto& cell : aggregator.Snapshot().cells) counted += cell.totals.requests();
  std::printf("counted=%llu\n", static_cast<unsigned long long>(counted));
  return 0;
}
