#!/usr/bin/env bash
# The whole test suite: installs the pinned Debian packages the real node needs, builds (or
# reuses) the test control plane, the real node's binaries, helm, the local images and the
# operator's images, then runs every unit, golden, real-API-server, real-node and
# real-OpenStack test of the workspace.
# Every build step returns at once on a warm machine (stamps under ~/.cache). The images are
# built beside the Go builds: they wait on the network and the disk where the Go builds wait
# on the CPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v go >/dev/null || { echo "go is required to build the test control plane" >&2; exit 1; }

step() { local t; t=$(date +%s); "$@"; echo "[test.sh] $* took $(( $(date +%s) - t ))s" >&2; }
step tests/install-host-packages.sh
images_log=$(mktemp)
step tests/build-images.sh >"$images_log" 2>&1 &
images=$!
NOVA_TESTBIN=$(step tests/build-control-plane.sh)
export NOVA_TESTBIN
step tests/build-node.sh >/dev/null
NOVA_HELM=$(step tests/build-helm.sh)
export NOVA_HELM
if ! wait "$images"; then
  tail -40 "$images_log" >&2
  echo "[test.sh] tests/build-images.sh failed (log above)" >&2
  exit 1
fi
grep -E '^\[images build' "$images_log" >&2 || true
rm -f "$images_log"
# The operator's own images (a static release build), for the chart's install test.
step images/build.sh >/dev/null
step cargo test --workspace --locked
