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

// Made-up addresses cannot grow the table past its bound; the oldest is forgotten first.
TEST(ScrapeWitnessTest, BoundedByForgettingTheOldest) {
  ScrapeWitness witness;
  witness.Delivered("prometheus", 500);
  for (int i = 0; i < 10000; ++i) witness.Delivered(absl::StrCat("10.1.", i / 256, ".", i % 256), 100);
  // "prometheus" (the newest) survived: it alone is active at 550, and has not scraped since.
  EXPECT_FALSE(witness.AllSince(550));
  witness.Delivered("prometheus", 560);
  EXPECT_TRUE(witness.AllSince(550));
}

}  // namespace
}  // namespace kvledger
