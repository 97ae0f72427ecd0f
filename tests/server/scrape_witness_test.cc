#include "server/scrape_witness.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kvledger {
namespace {

// Nobody known: keep waiting (a scraper may still come). One scraper: done once a scrape that began
// at or after the instant was written whole, not one that began before it.
TEST(ScrapeWitnessTest, WaitsForAScrapeThatBeganAfterTheInstant) {
  ScrapeWitness witness;
  EXPECT_FALSE(witness.AllSince(100));
  witness.Delivered("10.0.0.1", 90);
  EXPECT_FALSE(witness.AllSince(100));
  witness.Delivered("10.0.0.1", 99.9);  // written after 100, begun before: misses what came in between
  EXPECT_FALSE(witness.AllSince(100));
  witness.Delivered("10.0.0.1", 100);
  EXPECT_TRUE(witness.AllSince(100));
  witness.Delivered("10.0.0.1", 95);  // a late page of an earlier scrape changes nothing
  EXPECT_TRUE(witness.AllSince(100));
}

// Two Prometheus servers (an HA pair) both scraping: each must have scraped since; one gone quiet
// for longer than kActiveSeconds is not waited for.
TEST(ScrapeWitnessTest, EveryActiveScraperAndNoStaleOne) {
  ScrapeWitness witness;
  witness.Delivered("10.0.0.1", 990);
  witness.Delivered("10.0.0.2", 995);
  witness.Delivered("10.0.0.3", 1000 - ScrapeWitness::kActiveSeconds - 1);  // stale
  witness.Delivered("10.0.0.1", 1001);
  EXPECT_FALSE(witness.AllSince(1000));
  witness.Delivered("10.0.0.2", 1002);
  EXPECT_TRUE(witness.AllSince(1000));
  // Only stale scrapers: nobody to wait for who is known to be there; keep waiting for the grace.
  ScrapeWitness quiet;
  quiet.Delivered("10.0.0.3", 1);
  EXPECT_FALSE(quiet.AllSince(1000));
}

// Made-up addresses cannot grow the table past its bound; only an inactive address is forgotten to
// make room.
TEST(ScrapeWitnessTest, BoundedByForgettingOnlyTheInactive) {
  ScrapeWitness witness;
  witness.Delivered("prometheus", 500);
  for (int i = 0; i < 10000; ++i) witness.Delivered(absl::StrCat("10.1.", i / 256, ".", i % 256), 100);
  // "prometheus" (the newest) survived: it alone is active at 550, and has not scraped since.
  EXPECT_FALSE(witness.AllSince(550));
  witness.Delivered("prometheus", 560);
  EXPECT_TRUE(witness.AllSince(550));
}

// A flood of active addresses before the cutoff cannot push a scraper out: it stays waited for.
// One that found the table full of active addresses makes the witness wait (it cannot say whether
// that scraper read again) — the flood lengthens the wait, it never shortens it.
TEST(ScrapeWitnessTest, AFloodNeverShortensTheWait) {
  ScrapeWitness crowded;
  crowded.Delivered("prometheus", 990);
  for (int i = 0; i < 200; ++i) crowded.Delivered(absl::StrCat("10.2.0.", i), 995);
  for (int i = 0; i < 200; ++i) crowded.Delivered(absl::StrCat("10.2.0.", i), 1001);
  EXPECT_FALSE(crowded.AllSince(1000));  // prometheus has not read since, and overflowed ones are unknown
  crowded.Delivered("prometheus", 1002);
  EXPECT_FALSE(crowded.AllSince(1000));  // still: addresses went untracked within the active window
  // Once the overflow is older than the active window, the tracked scrapers decide again.
  const double later = 1001 + ScrapeWitness::kActiveSeconds + 1;
  EXPECT_FALSE(crowded.AllSince(later));
  crowded.Delivered("prometheus", later + 1);
  EXPECT_TRUE(crowded.AllSince(later));

  ScrapeWitness full;  // the flood came first: prometheus never got in
  for (size_t i = 0; i < ScrapeWitness::kMaxScrapers; ++i) full.Delivered(absl::StrCat("10.3.0.", i), 990);
  full.Delivered("prometheus", 995);
  for (size_t i = 0; i < ScrapeWitness::kMaxScrapers; ++i) full.Delivered(absl::StrCat("10.3.0.", i), 1001);
  EXPECT_FALSE(full.AllSince(1000));  // every tracked one read again, but prometheus went untracked
}

// After Freeze, new addresses are not admitted: a flood during the wait changes nothing.
TEST(ScrapeWitnessTest, FrozenAtTheCutoff) {
  ScrapeWitness witness;
  witness.Delivered("prometheus", 990);
  witness.Freeze();
  for (int i = 0; i < 200; ++i) witness.Delivered(absl::StrCat("10.4.0.", i), 1001);
  EXPECT_FALSE(witness.AllSince(1000));
  witness.Delivered("prometheus", 1005);
  EXPECT_TRUE(witness.AllSince(1000));
}

}  // namespace
}  // namespace kvledger
