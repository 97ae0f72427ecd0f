#!/usr/bin/env bash
# Regenerates the checked-in Python protobuf/gRPC modules of the kvledger package
# (client/python/kvledger/v1/) from proto/ with the system protoc and grpc_python_plugin.
#   scripts/generate-python-stubs.sh [OUT_DIR]   (default client/python; a test uses a temp dir)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/client/python}"
mkdir -p "$out"
protoc -I "$root/proto" --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin \
  "$root"/proto/kvledger/v1/advice.proto "$root"/proto/kvledger/v1/capacity.proto "$root"/proto/kvledger/v1/profile.proto "$root"/proto/kvledger/v1/record.proto "$root"/proto/kvledger/v1/ledger.proto
