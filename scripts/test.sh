#!/usr/bin/env bash
# Sets up the machine, then builds and runs every test through ctest twice: an optimized build with
# warnings as errors, and a build under AddressSanitizer + UndefinedBehaviorSanitizer. The tests
# are the C++ unit and in-process gRPC tests, the CLI tests, and the end-to-end test with the
# Python grpcio client, promtool and a real Prometheus. Exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_root="${KVLEDGER_BUILD_DIR:-$root/build}"

"$root/scripts/setup"

run_suite() {  # run_suite NAME CMAKE_ARGS...
  local dir="$build_root/$1"
  shift
  echo "test.sh: === $(basename "$dir") build ==="
  cmake -S "$root" -B "$dir" -DKVLEDGER_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
  (cd "$dir" && ctest --output-on-failure -j"$(nproc)" --timeout 600)
}

run_suite test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLEDGER_SANITIZE=OFF
run_suite sanitize -DCMAKE_BUILD_TYPE=Debug -DKVLEDGER_SANITIZE=ON
