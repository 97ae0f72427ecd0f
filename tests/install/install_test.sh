#!/usr/bin/env bash
# lib/ on its own: configures kvledger as docs/integration.md's recipe does (-DKVLEDGER_LIB_ONLY=ON
# -DKVLEDGER_BUILD_TESTS=OFF) while gRPC, civetweb, GTest and Google Benchmark are forbidden from
# being found, builds and installs it into a temporary prefix, then builds the
# out-of-tree consumer in tests/install/consumer against the installed package and checks what it
# prints (the figures are hand-checkable: a 2048-token hit on a 4096-token prompt avoids
# 2048·2049 / (4096·4097) of causal attention).
# usage: install_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src="$1"
work="$2"
rm -rf "$work"
mkdir -p "$work"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DKVLEDGER_LIB_ONLY=ON -DKVLEDGER_BUILD_TESTS=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_gRPC=ON -DCMAKE_DISABLE_FIND_PACKAGE_civetweb=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON \
  -DCMAKE_INSTALL_PREFIX="$work/prefix" --no-warn-unused-cli >/dev/null
cmake --build "$work/build" -j"$(nproc)" >/dev/null
cmake --install "$work/build" >/dev/null
if grep -rqE "gRPC::|civetweb::|grpc\+\+" "$work/prefix/lib/cmake/kvledger"; then
  echo "FAIL: the installed package mentions gRPC or civetweb" >&2
  exit 1
fi
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
out="$("$work/consumer/consumer")"
echo "$out"
expected="reused_tokens=2048 attention_avoided_fraction=0.250061
rejected invalid_logical_match_tokens: logical_match_tokens = 5000: must be in [0, prompt_tokens = 4096]
counted=1"
if [[ "$out" != "$expected" ]]; then
  echo "FAIL: expected:" >&2
  echo "$expected" >&2
  exit 1
fi
echo "install_test: OK"
