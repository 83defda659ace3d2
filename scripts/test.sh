#!/usr/bin/env bash
# The whole test suite: installs the pinned Debian packages the real node needs, builds (or
# reuses) the test control plane, the real node's binaries and the local images, then runs
# every unit, golden, real-API-server, real-node and real-OpenStack test of the workspace.
# Every build step returns at once on a warm machine (stamps under ~/.cache).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v go >/dev/null || { echo "go is required to build the test control plane" >&2; exit 1; }

step() { local t; t=$(date +%s); "$@"; echo "[test.sh] $1 took $(( $(date +%s) - t ))s" >&2; }
step tests/install-host-packages.sh
NOVA_TESTBIN=$(step tests/build-control-plane.sh)
export NOVA_TESTBIN
step tests/build-node.sh >/dev/null
step tests/build-images.sh >/dev/null
step cargo test --workspace --locked
