#!/usr/bin/env bash
# Sets up the machine, then builds and runs every test through ctest twice: an optimized build with
# warnings as errors, and a build under AddressSanitizer + UndefinedBehaviorSanitizer; then the
# Reporter's queue, accounting and registry tests under ThreadSanitizer. The tests
# are the C++ unit and in-process gRPC tests, the CLI tests, and the end-to-end test with the
# Python grpcio client, promtool and a real Prometheus. Last, the libFuzzer targets (clang) run for
# a fixed time each. Every stage runs and reports its result; exits non-zero at the end if any failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_root="${KVLEDGER_BUILD_DIR:-$root/build}"

"$root/scripts/setup" || { echo "test.sh: setup failed" >&2; exit 1; }

# Every stage runs, whatever the one before it did; each says its result, and the script fails at
# the end if any failed.
summary=()
failed=0

# ctest_in DIR [ARGS...]: runs ctest in DIR; its summary line is kept in DIR/ctest.log.
ctest_in() {
  local dir="$1"
  shift
  (cd "$dir" && ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@") | tee "$dir/ctest.log"
}

# stage NAME DIR COMMAND...: runs COMMAND (which builds DIR and runs ctest in it, returning non-zero
# at the first step that fails) and records the result.
stage() {
  local name="$1" dir="$2"
  shift 2
  echo "test.sh: === $name ==="
  rm -f "$dir/ctest.log"
  local result
  if "$@"; then result="passed"; else result="FAILED"; failed=1; fi
  local counts
  counts="$(sed -n 's/.*\(tests passed, [0-9]* tests failed out of [0-9]*\).*/\1/p' "$dir/ctest.log" 2>/dev/null | tail -n 1)"
  summary+=("$name: $result${counts:+ ($counts)}")
  # A test that cannot run here (a kernel feature the machine lacks) exits with its SKIP_RETURN_CODE
  # after printing "SKIP: <test>: <reason>"; the reason goes into the summary.
  local skipped
  skipped="$(grep -h '^SKIP: ' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u)"
  while IFS= read -r line; do [ -n "$line" ] && summary+=("  skipped ${line#SKIP: }"); done <<<"$skipped"
  echo "test.sh: $name: $result"
}

configure_build_test() {  # configure_build_test DIR CMAKE_ARGS...
  local dir="$1"
  shift
  cmake -S "$root" -B "$dir" -DKVLEDGER_WERROR=ON "$@" >/dev/null || return 1
  cmake --build "$dir" -j"$(nproc)" || return 1
  ctest_in "$dir"
}

stage "test build" "$build_root/test" configure_build_test "$build_root/test" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVLEDGER_SANITIZE=OFF
stage "sanitize (ASan + UBSan)" "$build_root/sanitize" configure_build_test "$build_root/sanitize" \
  -DCMAKE_BUILD_TYPE=Debug -DKVLEDGER_SANITIZE=ON

# ThreadSanitizer: the Reporter's lock-free queue and sender thread with many producers (fake
# transports, so no uninstrumented gRPC code runs in the tested threads), the accounting and
# model-registry tests (concurrent label claims, shuffled multi-threaded replays, capacity curves fed by
# several threads) and the batch
# deduplicator under concurrent claims, and the bulk lane's thread. Every lock in the project is a kvledger::Mutex (std::mutex),
# which TSan sees. The in-process gRPC service tests are not run under TSan: Debian's gRPC and
# abseil are not instrumented, so every hand-off between gRPC's threads is reported as a race
# (docs/security.md, "Sanitizers").
tsan_stage() {
  local tsan="$build_root/tsan"
  cmake -S "$root" -B "$tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLEDGER_WERROR=ON -DKVLEDGER_TSAN=ON \
    -DKVLEDGER_BUILD_BENCH=OFF >/dev/null || return 1
  cmake --build "$tsan" -j"$(nproc)" --target reporter_queue_test accounting_test capacity_test profiles_test server_test || return 1
  TSAN_OPTIONS="halt_on_error=1" ctest_in "$tsan" \
    -R '^(ReporterQueueTest|AggregatorTest|LedgerTest|ModelRegistryTest|DeriveTest|BatchDeduplicatorTest|LiveRatesTest|DecayedRateTest|EngineStatsTest|FleetRatesTest|CapacityCurvesThreadsTest|BulkLaneTest)\.'
}
stage "tsan" "$build_root/tsan" tsan_stage

fuzz_stage() {
  local fuzz="$build_root/fuzz"
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLEDGER_WERROR=ON \
    -DKVLEDGER_FUZZ=ON -DKVLEDGER_FUZZ_SECONDS="${KVLEDGER_FUZZ_SECONDS:-20}" >/dev/null || return 1
  cmake --build "$fuzz" -j"$(nproc)" --target record_fuzzer profile_fuzzer http_head_fuzzer web_config_fuzzer trace_fuzzer prometheus_answer_fuzzer || return 1
  ctest_in "$fuzz" -R '^fuzz\.'
}
stage "fuzz (libFuzzer, ${KVLEDGER_FUZZ_SECONDS:-20} s per target)" "$build_root/fuzz" fuzz_stage

echo "test.sh: results"
for line in "${summary[@]}"; do echo "test.sh:   $line"; done
if [ "$failed" -ne 0 ]; then
  echo "test.sh: FAILED" >&2
  exit 1
fi
echo "test.sh: every stage passed"
