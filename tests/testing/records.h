// The served request the tests build again and again — a hit of `match` of `prompt` tokens with the
// usual measured times (reload 10 ms, suffix prefill 200 ms, TTFT 250 ms) — in one place, as the
// domain's facts and as the wire message. A test that needs another shape changes the copy it gets.
#ifndef KVLEDGER_TESTS_TESTING_RECORDS_H_
#define KVLEDGER_TESTS_TESTING_RECORDS_H_

#include <cstdint>

#include "kvledger/v1/record.pb.h"
#include "lib/accounting/record_facts.h"

namespace kvledger::testing {

inline constexpr double kHitReloadSeconds = 0.01;
inline constexpr double kHitSuffixPrefillSeconds = 0.2;
inline constexpr double kHitTtftSeconds = 0.25;

// `model` is viewed, not copied: pass a literal (or a string that outlives the facts).
inline RecordFacts HitFacts(const char* model, int64_t prompt, int64_t match, int tier_value = 1 /* device */) {
  RecordFacts f;
  f.model = model;
  f.tier_value = tier_value;
  f.prompt_tokens = prompt;
  f.logical_match_tokens = match;
  f.reload_seconds = kHitReloadSeconds;
  f.suffix_prefill_seconds = kHitSuffixPrefillSeconds;
  f.ttft_seconds = kHitTtftSeconds;
  return f;
}

inline v1::Record HitRecord(const char* model, int64_t prompt, int64_t match, v1::Tier tier = v1::TIER_DEVICE) {
  v1::Record r;
  r.set_model(model);
  r.set_tier(tier);
  r.set_prompt_tokens(prompt);
  r.set_logical_match_tokens(match);
  r.set_reload_seconds(kHitReloadSeconds);
  r.set_suffix_prefill_seconds(kHitSuffixPrefillSeconds);
  r.set_ttft_seconds(kHitTtftSeconds);
  return r;
}

}  // namespace kvledger::testing

#endif  // KVLEDGER_TESTS_TESTING_RECORDS_H_
