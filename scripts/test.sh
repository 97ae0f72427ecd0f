#!/usr/bin/env bash
# Sets up the machine, builds everything with warnings as errors, and runs every test through
# ctest: C++ unit and in-process gRPC tests, the CLI tests, and the end-to-end test with the
# Python grpcio client, promtool and a real Prometheus. Exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVLEDGER_BUILD_DIR:-$root/build/test}"

"$root/scripts/setup"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLEDGER_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600
