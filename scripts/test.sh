#!/usr/bin/env bash
# The whole test suite: builds (or reuses) the test control plane, then runs every unit,
# golden and real-API-server test of the workspace.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v go >/dev/null || { echo "go is required to build the test control plane" >&2; exit 1; }

NOVA_TESTBIN=$(tests/build-control-plane.sh)
export NOVA_TESTBIN
cargo test --workspace --locked
