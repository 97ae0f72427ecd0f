#!/usr/bin/env bash
# Sets up the machine, then builds and runs every test through ctest twice: an optimized build with
# warnings as errors, and a build under AddressSanitizer + UndefinedBehaviorSanitizer; then the
# Reporter's queue, accounting and registry tests under ThreadSanitizer. The tests
# are the C++ unit and in-process gRPC tests, the CLI tests, and the end-to-end test with the
# Python grpcio client, promtool and a real Prometheus. Last, the libFuzzer targets (clang) run for
# a fixed time each. Exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_root="${KVLEDGER_BUILD_DIR:-$root/build}"

"$root/scripts/setup"
total=0

# ctest_in DIR [ARGS...]: runs ctest in DIR and adds its test count to $total.
ctest_in() {
  local dir="$1"
  shift
  local log="$dir/ctest.log"
  (cd "$dir" && ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@") | tee "$log"
  total=$((total + $(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)))
}

run_suite() {  # run_suite NAME CMAKE_ARGS...
  local dir="$build_root/$1"
  shift
  echo "test.sh: === $(basename "$dir") build ==="
  cmake -S "$root" -B "$dir" -DKVLEDGER_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
  ctest_in "$dir"
}

run_suite test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLEDGER_SANITIZE=OFF
run_suite sanitize -DCMAKE_BUILD_TYPE=Debug -DKVLEDGER_SANITIZE=ON

# ThreadSanitizer: the Reporter's lock-free queue and sender thread with many producers (fake
# transports, so no uninstrumented gRPC code runs in the tested threads), the accounting and
# model-registry tests (concurrent label claims, shuffled multi-threaded replays) and the batch
# deduplicator under concurrent claims. Every lock in the project is a kvledger::Mutex (std::mutex),
# which TSan sees. The in-process gRPC service tests are not run under TSan: Debian's gRPC and
# abseil are not instrumented, so every hand-off between gRPC's threads is reported as a race
# (docs/security.md, "Sanitizers").
echo "test.sh: === tsan build ==="
tsan="$build_root/tsan"
cmake -S "$root" -B "$tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLEDGER_WERROR=ON -DKVLEDGER_TSAN=ON \
  -DKVLEDGER_BUILD_BENCH=OFF >/dev/null
cmake --build "$tsan" -j"$(nproc)" --target reporter_queue_test accounting_test profiles_test server_test
export TSAN_OPTIONS="halt_on_error=1"
ctest_in "$tsan" -R '^(ReporterQueueTest|AggregatorTest|LedgerTest|ModelRegistryTest|DeriveTest|BatchDeduplicatorTest|LiveRatesTest|DecayedRateTest|EngineStatsTest)\.'

echo "test.sh: === fuzz (libFuzzer, ${KVLEDGER_FUZZ_SECONDS:-20} s per target) ==="
fuzz="$build_root/fuzz"
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLEDGER_WERROR=ON \
  -DKVLEDGER_FUZZ=ON -DKVLEDGER_FUZZ_SECONDS="${KVLEDGER_FUZZ_SECONDS:-20}" >/dev/null
cmake --build "$fuzz" -j"$(nproc)" --target record_fuzzer profile_fuzzer
ctest_in "$fuzz" -R '^fuzz\.'

echo "test.sh: $total passed, 0 failed"
