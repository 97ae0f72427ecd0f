#!/usr/bin/env bash
# Sets up the machine, builds a Release kvledger, and runs kvledger-server on its built-in
# defaults (gRPC 127.0.0.1:50051, metrics http://127.0.0.1:9464/metrics, built-in profiles).
# Extra arguments go to kvledger-server, e.g. scripts/run.sh --grpc_address=127.0.0.1:0
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVLEDGER_BUILD_DIR:-$root/build/release}"

"$root/scripts/setup" build   # what building needs; the test tools (Chromium, Prometheus, ...) are not
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVLEDGER_BUILD_TESTS=OFF -DKVLEDGER_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target kvledger-server kvledger reporter_example
echo "run.sh: client at $build/client/kvledger (try: $build/client/kvledger --help);" \
  "the C++ reporter's example at $build/client/reporter_example" >&2
exec "$build/server/kvledger-server" "$@"
