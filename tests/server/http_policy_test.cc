// The HTTP module's pure policies with a fake clock: the login throttle (per-address windows that
// expire by themselves, no address reset by others' failures, a bounded table, the password-hash
// CPU budget), basic auth (whole passwords, 5,000 failing addresses: once a use-after-free),
// and admission (fair connections, fair requests, round-robin workers).
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/http/admission.h"
#include "server/http/login_throttle.h"
#include "server/http/security.h"
#include "server/http/types.h"

namespace kvledger {
namespace {

using std::chrono::milliseconds;

struct FakeClock {
  HttpClock::time_point now{};
  HttpClockSource source() {
    return [this] { return now; };
  }
};

TEST(LoginThrottleTest, AnAddressWindowExpiresByItself) {
  FakeClock clock;
  LoginThrottle throttle({}, clock.source());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(throttle.MayTry("10.0.0.1").ok());
    throttle.Failed("10.0.0.1");
  }
  EXPECT_EQ(throttle.MayTry("10.0.0.1").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(HttpStatusOf(throttle.MayTry("10.0.0.1")), 429);
  EXPECT_TRUE(throttle.MayTry("10.0.0.2").ok());
  clock.now += milliseconds(999);
  EXPECT_FALSE(throttle.MayTry("10.0.0.1").ok());
  clock.now += milliseconds(1);
  EXPECT_TRUE(throttle.MayTry("10.0.0.1").ok());
}

TEST(LoginThrottleTest, OthersFailuresNeverResetAnAddress) {
  FakeClock clock;
  LoginThrottle::Limits limits;
  limits.tracked_addresses = 1024;
  LoginThrottle throttle(limits, clock.source());
  for (int i = 0; i < 5; ++i) throttle.Failed("attacker");
  for (int i = 0; i < 5000; ++i) throttle.Failed(absl::StrCat("10.1.", i / 256, ".", i % 256));
  EXPECT_LE(throttle.tracked(), 1024u);  // bounded: new addresses past the table are not tracked
  EXPECT_FALSE(throttle.MayTry("attacker").ok());
  clock.now += milliseconds(1000);  // every window expired: the next new address sweeps them
  throttle.Failed("newcomer");
  EXPECT_EQ(throttle.tracked(), 1u);
  EXPECT_TRUE(throttle.MayTry("attacker").ok());
}

TEST(LoginThrottleTest, HashingTakesAtMostItsShareOfACore) {
  FakeClock clock;
  LoginThrottle::Limits limits;
  limits.hash_core_share = 0.25;
  limits.hash_burst = milliseconds(1000);
  LoginThrottle throttle(limits, clock.source());
  // 100 ms hashes from ever-new addresses (no per-address limit applies) for 60 s of fake time.
  std::chrono::nanoseconds hashing{0};
  for (int step = 0; step < 6000; ++step) {
    const std::string peer = absl::StrCat("a", step);
    if (throttle.MayHash(peer).ok()) {
      throttle.Hashed(milliseconds(100));
      hashing += milliseconds(100);
    }
    clock.now += milliseconds(10);
  }
  const double share = std::chrono::duration<double>(hashing).count() / 60.0;
  EXPECT_LE(share, 0.25 + 1.0 / 60 + 0.1 / 60);  // the burst and one hash beyond
  EXPECT_GE(share, 0.2);
  EXPECT_EQ(throttle.MayHash("x").message(), "password checks are using their share of the CPU (0.25 of a core)");
}

std::string Basic(const std::string& credentials) { return "Basic " + absl::Base64Escape(credentials); }

TEST(BasicAuthenticatorTest, ComparesTheWholePassword) {
  auto auth = BasicAuthenticator::FromPassword("prometheus", "s3cret");
  EXPECT_EQ(auth->Check(Basic("prometheus:s3cret"), "p1"), BasicAuthenticator::Verdict::kAllowed);
  EXPECT_EQ(auth->Check(Basic(std::string("prometheus:s3cret\0tail", 22)), "p2"), BasicAuthenticator::Verdict::kDenied);
  EXPECT_EQ(auth->Check(Basic("prometheus:s3cretX"), "p3"), BasicAuthenticator::Verdict::kDenied);
  // bcrypt: a hash of "s3cret" at cost 4; the NUL suffix and a 73rd byte are never compared as equal.
  auto hashed = BasicAuthenticator::FromHashes({{"prometheus", "$2b$04$OGz0sjRf/uRwheExdYxfGeMwUfTnBnri3uM7wPSiwhAAxN59qTh3q"}});
  EXPECT_EQ(hashed->Check(Basic("prometheus:s3cret"), "p1"), BasicAuthenticator::Verdict::kAllowed);
  EXPECT_EQ(hashed->Check(Basic(std::string("prometheus:s3cret\0x", 19)), "p2"), BasicAuthenticator::Verdict::kDenied);
  EXPECT_EQ(hashed->Check(Basic("prometheus:" + std::string(73, 'a')), "p3"), BasicAuthenticator::Verdict::kDenied);
}

// Failing logins from 5,000 addresses (past the old 4,096-entry clear, which freed an entry still
// being read: under ASan this test reported a heap use-after-free) and the first address is still
// throttled.
TEST(BasicAuthenticatorTest, FiveThousandFailingAddresses) {
  FakeClock clock;
  auto auth = BasicAuthenticator::FromPassword("u", "right", {}, clock.source());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(auth->Check(Basic("u:wrong"), "first"), BasicAuthenticator::Verdict::kDenied);
  EXPECT_EQ(auth->Check(Basic("u:wrong"), "first"), BasicAuthenticator::Verdict::kThrottled);
  for (int i = 0; i < 5000; ++i) {
    const std::string peer = absl::StrCat("127.1.", i / 256, ".", i % 256);
    EXPECT_EQ(auth->Check(Basic("u:wrong"), peer), BasicAuthenticator::Verdict::kDenied);
    EXPECT_EQ(auth->Check("Bearer x", peer), BasicAuthenticator::Verdict::kDenied);
  }
  std::string why;
  EXPECT_EQ(auth->Check(Basic("u:wrong"), "first", &why), BasicAuthenticator::Verdict::kThrottled);
  EXPECT_EQ(why, "5 failed logins from first within 1000 ms");
  clock.now += milliseconds(1000);
  EXPECT_EQ(auth->Check(Basic("u:right"), "first"), BasicAuthenticator::Verdict::kAllowed);
}

// Every refusal of the HTTP stack and the JSON API leaves through one mapping.
TEST(HttpStatusOfTest, OneMapping) {
  EXPECT_EQ(HttpStatusOf(absl::OkStatus()), 200);
  EXPECT_EQ(HttpStatusOf(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpStatusOf(absl::NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatusOf(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpStatusOf(absl::InternalError("x")), 500);
}

TEST(ConnectionTableTest, BusyAddressesShareAndANewcomerFindsRoom) {
  AdmissionLimits limits;
  limits.connections = 100;
  limits.connections_per_client = 64;
  ConnectionTable table(limits);
  std::optional<std::string> victim;
  std::map<std::string, int> held;
  // 20 addresses try 64 connections each, in turns: each ends with its fair share, 5.
  for (int round = 0; round < 64; ++round) {
    for (int a = 0; a < 20; ++a) {
      const std::string peer = absl::StrCat("10.0.0.", a);
      if (!table.MayOpen(peer, &victim).ok()) continue;
      if (victim) {
        table.Closed(*victim);
        --held[*victim];
      }
      table.Opened(peer);
      ++held[peer];
    }
  }
  for (const auto& [peer, n] : held) EXPECT_EQ(n, 5) << peer;
  ASSERT_TRUE(table.MayOpen("scraper", &victim).ok());
  EXPECT_TRUE(victim.has_value());
  EXPECT_EQ(table.MayOpen("10.0.0.1", &victim).code(), absl::StatusCode::kUnavailable);  // it has 5, no one more
  for (int i = 0; i < 64; ++i) table.Opened("one");
  EXPECT_EQ(table.MayOpen("one", &victim).message(), "this address has 64 connections open, the most one address may");
}

// A slow reader's answer is parked whole or not at all; one address holds at most a quarter.
TEST(ParkedBudgetTest, WholeAnswersAndAQuarterPerAddress) {
  PerPeerBudget budget = MakeParkedBudget(64 << 20);
  const size_t page = 14200000;  // a 14.2 MB page (300 models x 4 tiers)
  EXPECT_TRUE(budget.TryTake("a", page));
  EXPECT_FALSE(budget.TryTake("a", page));  // 28.4 MB > 16 MiB for one address
  EXPECT_TRUE(budget.TryTake("b", page));
  EXPECT_TRUE(budget.TryTake("c", page));
  EXPECT_TRUE(budget.TryTake("d", page));
  EXPECT_FALSE(budget.TryTake("e", page));  // 71 MB > 64 MiB: not parked at all
  EXPECT_EQ(budget.used(), 4 * page);
  budget.Give("a", page);
  EXPECT_TRUE(budget.TryTake("e", page));
  EXPECT_TRUE(budget.TryTake("f", 1000));
  EXPECT_FALSE(budget.TryTake("f", size_t{64} << 20));
  budget.Give("f", 1000);
  EXPECT_EQ(budget.used(), 4 * page);
}

TEST(FairQueueTest, AnAddressWithNothingInFlightIsAlwaysAdmitted) {
  AdmissionLimits limits;
  limits.max_in_flight = 16;
  limits.in_flight_per_client = 8;
  limits.served_per_client = 2;
  FairQueue<int> queue(limits);
  for (int a = 0; a < 2; ++a) {
    for (int i = 0; i < 64; ++i) {
      const std::string peer = absl::StrCat("busy", a);
      if (queue.MayAdmit(peer).ok()) queue.Push(peer, i);
    }
  }
  EXPECT_EQ(queue.in_flight("busy0"), 8);
  EXPECT_EQ(queue.in_flight("busy1"), 8);
  EXPECT_EQ(queue.MayAdmit("busy0").message(), "this address has its share of requests in flight");
  ASSERT_TRUE(queue.MayAdmit("scraper").ok());  // past max_in_flight, but it has none
  queue.Push("scraper", 100);
  EXPECT_FALSE(queue.MayAdmit("scraper").ok());
  // Round robin: the scraper's request is among the first three served, whatever came before.
  std::vector<std::string> order;
  while (auto next = queue.Next()) order.push_back(next->first);
  ASSERT_EQ(order.size(), 5u);  // two each for the busy addresses (served_per_client), one scraper
  EXPECT_EQ(order[2], "scraper");
  queue.Done("busy0");
  auto next = queue.Next();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->first, "busy0");
  EXPECT_FALSE(queue.Next().has_value());  // busy1 has two in service already
}

}  // namespace
}  // namespace kvledger
