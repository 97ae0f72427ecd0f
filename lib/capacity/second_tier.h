// What a second tier below the device would buy (docs/cost-model.md §15): a host, disk or remote
// tier of a given size, exclusive and LRU, holding what the device evicts. With blocks used tail first
// a request's blocks at stack depth in (C, C + H] are the ones a device of C blocks has lost and a
// tier of H blocks still holds; reloading them costs the tier's wait plus their bytes over its
// bandwidth, and an engine that applies the break-even threshold (§13) recomputes them instead where
// that is slower. This file holds the tier sizes as people write them and that rule; the live curves
// (capacity_curves.h) and `kvledger plan --tier` apply it per request.
#ifndef KVLEDGER_LIB_CAPACITY_SECOND_TIER_H_
#define KVLEDGER_LIB_CAPACITY_SECOND_TIER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/accounting/record_facts.h"

namespace kvledger {

// The tier sizes of the live what-if by default: a host tier of 64 GiB, 256 GiB and 1 TiB, and a
// disk tier of 4 TiB.
inline constexpr char kDefaultTierLadder[] = "host:64GiB,host:256GiB,host:1TiB,disk:4TiB";
// The most tier sizes one ladder holds (each is a label value of the tier families).
inline constexpr size_t kMaxTierSizes = 8;

// The reload bandwidth assumed for a tier kind until records reloading from it give a measured one,
// bytes per second: nominal link rates, to be replaced by measurement (docs/cost-model.md §15).
// host: a PCIe 4.0 x16 link (32 GB/s a direction) less some 20 % of protocol overhead, 25 GB/s;
// disk: a PCIe 4.0 NVMe drive's rated sequential read, 6 GB/s; remote: a 100 Gb/s network, 12.5 GB/s.
double StatedTierBandwidth(Tier kind);

// One size of a second tier: its kind (host, disk or remote), its bytes, the bandwidth to assume
// when no record measured one (0: StatedTierBandwidth) and the wait before a reload starts.
struct TierSize {
  Tier kind = Tier::kHost;
  uint64_t bytes = 0;
  double stated_bytes_per_second = 0;
  double wait_seconds = 0;

  double StatedBandwidth() const {
    return stated_bytes_per_second > 0 ? stated_bytes_per_second : StatedTierBandwidth(kind);
  }
  // Blocks of `block_bytes` the tier holds (a partial block holds nothing).
  uint64_t Blocks(uint64_t block_bytes) const { return block_bytes == 0 ? 0 : bytes / block_bytes; }
};

// A byte count: a whole number, optionally with a unit (KB, MB, GB, TB: powers of 1000; KiB, MiB,
// GiB, TiB: powers of 1024), e.g. 1TiB, 512GB, 2.5e11. INVALID_ARGUMENT "FLAG = VALUE: RULE".
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text, absl::string_view flag);

// A comma-separated list of KIND:SIZE[:BYTES_PER_SECOND[:WAIT_SECONDS]], KIND one of host, disk,
// remote, at most kMaxTierSizes, no two alike in kind and size. Empty text: no tiers.
absl::StatusOr<std::vector<TierSize>> ParseTierLadder(absl::string_view text, absl::string_view flag);

// The label value of a tier size: its bytes.
std::string TierBytesLabel(uint64_t bytes);

// What an engine does with the part of a request's prefix a second tier holds: reload it (its bytes
// over `bytes_per_second` after `wait_seconds`) or, where that is slower than recomputing it
// (`recompute_seconds`, the prefill seconds of those tokens), recompute it under the break-even
// threshold. A tie recomputes.
struct TierReload {
  double reload_seconds = 0;
  double recompute_seconds = 0;
  bool slower = false;  // reloading is slower than recomputing (the threshold recomputes)
  // What the tier saves with the threshold on: recompute − reload where reloading, else 0.
  double SavedSeconds() const { return slower ? 0.0 : recompute_seconds - reload_seconds; }
  // What reloading regardless costs where it is slower: reload − recompute, else 0.
  double ExcessSeconds() const { return slower ? reload_seconds - recompute_seconds : 0.0; }
};
TierReload ChooseTierReload(double bytes, double recompute_seconds, double bytes_per_second, double wait_seconds);

}  // namespace kvledger

#endif  // KVLEDGER_LIB_CAPACITY_SECOND_TIER_H_
