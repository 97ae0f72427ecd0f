#include "server/scrape_witness.h"

#include <algorithm>

namespace kvledger {

void ScrapeWitness::Delivered(const std::string& peer, double started) {
  MutexLock lock(&mu_);
  auto found = latest_.find(peer);
  if (found != latest_.end()) {
    found->second = std::max(found->second, started);
    return;
  }
  if (frozen_) return;  // not waited for: it was not active at the cutoff
  if (latest_.size() >= kMaxScrapers) {
    auto oldest = std::min_element(latest_.begin(), latest_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    if (oldest->second >= started - kActiveSeconds) {  // every one is active: none is forgotten
      overflow_ = std::max(overflow_, started);
      return;
    }
    latest_.erase(oldest);
  }
  latest_.emplace(peer, started);
}

bool ScrapeWitness::Any() const {
  MutexLock lock(&mu_);
  return !latest_.empty();
}

void ScrapeWitness::Freeze() {
  MutexLock lock(&mu_);
  frozen_ = true;
}

bool ScrapeWitness::AllSince(double cutoff) const {
  MutexLock lock(&mu_);
  if (overflow_ >= cutoff - kActiveSeconds) return false;  // one active at the cutoff went untracked
  bool any = false;
  for (const auto& [peer, started] : latest_) {
    if (started >= cutoff) {
      any = true;
    } else if (started >= cutoff - kActiveSeconds) {
      return false;  // active, and not yet scraped since
    }
  }
  return any;
}

}  // namespace kvledger
