#!/usr/bin/env bash
# Sets up, builds Release, and measures: record-path micro-benchmarks (Google Benchmark, each beside
# its baseline), the reporters' Report() latency beside its floor, the gRPC service against
# kvledger-noop-server with the kvledger bench load generator (and ingest under 10 scrapes/s), and
# resident memory from 1 M to 100 M records; with KVLEDGER_BASELINE=<revision>, the /metrics side of
# that revision and this tree side by side (and their gRPC service and /metrics round trip, through
# bench/compare_builds.py). Results go to stdout; docs/performance.md records a run.
# Extra arguments go to bench/compare_servers.py (e.g. --duration 10 --repetitions 5).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVLEDGER_BUILD_DIR:-$root/build/release}"

"$root/scripts/setup"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVLEDGER_BUILD_TESTS=OFF -DKVLEDGER_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target kvledger-server kvledger-noop-server kvledger record_path_bench \
  reporter_latency planning_bench capacity_bench

echo "## Record path (Google Benchmark, median of 5 repetitions)"
"$build/bench/record_path_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.5 2>&1 | grep -E "^(BM_|Run on|CPU|Load)" | grep -vE "_(mean|stddev|cv)"
echo
echo "## Planning: the conversation trace read and simulated, beside reading its lines"
"$build/bench/planning_bench" "$root/examples/traces/mooncake-conversation.jsonl" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true 2>&1 | grep -E "^BM_.*_median"
echo
echo "## Capacity curves: Reporter work and the record path with and without block ids, stack memory"
"$build/bench/capacity_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 | grep -E "^BM_.*_median"
echo
echo "## Reporter: Report() latency beside its floor (C++, then Python)"
"$build/bench/reporter_latency"
/usr/bin/python3 "$root/bench/reporter_latency.py"
/usr/bin/python3 "$root/bench/connector_cost.py"
echo
echo "## gRPC service vs no-op baseline"
/usr/bin/python3 "$root/bench/compare_servers.py" "$build" "$@"
echo
echo "## Memory: settled RSS from 1 M to 100 M records, bytes per (model, tier)"
/usr/bin/python3 "$root/bench/memory_flat.py" "$build"

# With KVLEDGER_BASELINE=<git revision>: that revision is built beside this one (a git worktree) and
# the /metrics side of both is measured in the same run: BM_Scrape alternately, then
# bench/compare_scrape.py (CPU and peak memory per scrape, ingest while scraped).
if [ -n "${KVLEDGER_BASELINE:-}" ]; then
  baseline_src="$build-baseline-src"
  baseline="$build-baseline"
  [ -d "$baseline_src" ] || git -C "$root" worktree add -q --detach "$baseline_src" "$KVLEDGER_BASELINE"
  git -C "$baseline_src" checkout -q --detach "$KVLEDGER_BASELINE"
  cmake -S "$baseline_src" -B "$baseline" -DCMAKE_BUILD_TYPE=Release -DKVLEDGER_BUILD_TESTS=OFF >/dev/null
  cmake --build "$baseline" -j"$(nproc)" --target kvledger-server record_path_bench
  echo
  echo "## BM_Scrape: $KVLEDGER_BASELINE (baseline) and this tree, alternating, median of 5 each"
  for round in 1 2; do
    for which in "$baseline" "$build"; do
      echo "# $which (round $round)"
      "$which/bench/record_path_bench" --benchmark_filter=BM_Scrape --benchmark_repetitions=5 \
        --benchmark_report_aggregates_only=true 2>&1 | grep -E "^BM_Scrape.*_median"
    done
  done
  echo
  /usr/bin/python3 "$root/bench/compare_scrape.py" "$baseline" "$build"
  echo
  echo "## The gRPC service and /metrics: $KVLEDGER_BASELINE (baseline) and this tree, alternating"
  /usr/bin/python3 "$root/bench/compare_builds.py" "$baseline" "$build"
fi
