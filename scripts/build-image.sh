#!/usr/bin/env bash
# Builds the kvledger container image with podman, without any registry: a Debian bookworm base is
# made with debootstrap from the machine's own apt mirror and imported under the names the
# Dockerfile's FROM lines use. Then runs the image and checks that gRPC health answers SERVING and
# /metrics answers. Needs root (debootstrap). Takes about 10-15 minutes on 2 cores, most of it the
# C++ build inside the image.
#   scripts/build-image.sh [TAG]     (default localhost/kvledger:latest)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag="${1:-localhost/kvledger:latest}"
work="${KVLEDGER_IMAGE_WORK:-/var/tmp/kvledger-image}"
mkdir -p "$work"

need=()
for p in podman buildah debootstrap uidmap fuse-overlayfs; do
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  [[ "$status" == *"install ok installed"* ]] || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# The base image, once: debootstrap from the mirror apt already uses.
if ! podman image exists docker.io/library/debian:bookworm; then
  mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n 1)"
  [ -n "$mirror" ] || mirror="$(awk '/^deb / && !/security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)"
  echo "build-image: debootstrap bookworm from ${mirror}" >&2
  rm -rf "$work/rootfs"
  mkdir -p "$work"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log"
  # The image's own apt sources: the same mirror, plus security updates when it has them.
  echo "deb $mirror bookworm main" >"$work/rootfs/etc/apt/sources.list"
  tar -C "$work/rootfs" -c . | podman import - docker.io/library/debian:bookworm
  podman tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
fi

start=$(date +%s)
podman build --isolation chroot --network host --pull=never -t "$tag" -f "$root/Dockerfile" "$root"
echo "build-image: built $tag in $(( $(date +%s) - start )) s" >&2

# Run it on loopback ports of this machine and check both listeners. The container runs with
# buildah's chroot isolation, like the build: on machines where the OCI runtime may not set rlimits or
# cgroups (`podman run` fails there with "setrlimit ... Operation not permitted"), this still runs the
# image's own filesystem, libraries, user and binaries. Elsewhere `podman run` / `docker run` work as usual.
grpc_port=$(( 20000 + RANDOM % 10000 )); metrics_port=$(( grpc_port + 1 ))
container="$(buildah from --pull-never "$tag")"
buildah run --isolation chroot --network host "$container" -- /usr/local/bin/kvledger-server \
  --grpc_address=127.0.0.1:$grpc_port --metrics_address=127.0.0.1:$metrics_port >"$work/server.log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true; buildah rm "$container" >/dev/null 2>&1 || true' EXIT
ok=""
for _ in $(seq 1 100); do
  # The image's HEALTHCHECK command, run inside the image.
  health="$(buildah run --isolation chroot --network host "$container" -- /usr/local/bin/kvledger health \
       --target 127.0.0.1:$grpc_port --timeout 1 2>/dev/null || true)"
  if [ "$health" = SERVING ]; then ok=1; break; fi
  sleep 0.2
done
[ -n "$ok" ] || { echo "build-image: gRPC health never answered SERVING" >&2; exit 1; }
# Each answer is read whole before it is matched: `curl | grep -q` under pipefail fails whenever grep
# exits at its match before curl has written the rest (curl: (23) Failed writing body).
metrics="$(curl -fsS "http://127.0.0.1:$metrics_port/metrics")" && grep -q '^kvledger_build_info' <<<"$metrics" \
  || { echo "build-image: /metrics did not answer" >&2; exit 1; }
explore="$(curl -fsS "http://127.0.0.1:$metrics_port/explore")" && grep -q 'what-if explorer' <<<"$explore" \
  || { echo "build-image: /explore did not answer" >&2; exit 1; }
uid="$(buildah run --isolation chroot "$container" -- id -u)" && [ "$uid" = 10001 ] \
  || { echo "build-image: the image does not run as uid 10001" >&2; exit 1; }
echo "build-image: $tag runs as uid 10001; gRPC health SERVING; /metrics and /explore answer" >&2
podman image ls "$tag"
