// Proves: once a (model, tier) cell exists, accounting a record allocates nothing on the heap —
// validation, resolving the model, deriving every figure, aggregation — counted with a replacement
// global operator new. The parse is the wire's business and is not counted here.
#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "gtest/gtest.h"

// The replacement operator new below pairs malloc with free on purpose.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#include "lib/accounting/aggregator.h"
#include "lib/accounting/ledger.h"
#include "lib/profiles/model_registry.h"
#include "lib/profiles/profile_catalog.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<uint64_t> allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace kvledger {
namespace {

TEST(AllocationTest, AccountingARecordAllocatesNothing) {
  const ProfileCatalog catalog = ProfileCatalog::Builtin();
  ModelRegistry registry(catalog, 8, UnknownModelPolicy::kGeneric);
  Aggregator aggregator(registry.slots().slot_count());
  Ledger ledger(registry, aggregator);
  // Every attention kind: full, sliding window, MLA, hybrid (recurrent), and an unknown name.
  const char* const models[] = {"llama-3.1-8b", "gemma-2-9b", "deepseek-v3", "kimi-linear-48b-a3b",
                                "qwen3-next-80b-a3b", "someone-s-finetune"};
  std::vector<RecordFacts> records;
  for (const char* model : models) {
    for (int tier = 0; tier <= 4; ++tier) {
      RecordFacts f;
      f.model = model;
      f.tier_value = tier;
      f.prompt_tokens = 8192;
      f.logical_match_tokens = tier == 0 ? 0 : 4000;
      f.reload_seconds = 0.01;
      f.suffix_prefill_seconds = 0.3;
      f.ttft_seconds = 0.35;
      records.push_back(f);
    }
  }
  RecordFacts bad = records[1];
  bad.logical_match_tokens = 9000;
  for (const RecordFacts& f : records) ASSERT_TRUE(ledger.Record(f).ok());  // creates every cell
  counting = true;
  for (int round = 0; round < 200; ++round) {
    for (const RecordFacts& f : records) (void)ledger.Record(f);
  }
  counting = false;
  EXPECT_EQ(allocations.load(), 0u) << "heap allocations in " << 200 * records.size() << " records";
  allocations = 0;
  counting = true;
  const Verdict rejected = ledger.Record(bad);
  counting = false;
  EXPECT_FALSE(rejected.ok());
  EXPECT_GT(allocations.load(), 0u);  // the counter counts: a rejection builds its message (allowed)
}

}  // namespace
}  // namespace kvledger
