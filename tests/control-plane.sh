#!/usr/bin/env bash
# Brings the test control plane up in the background (or down, or reports its status) for
# manual use: `eval "$(tests/control-plane.sh up)"` exports KUBECONFIG. State, certificates and
# component logs live in ${NOVA_DEV_STATE:-$HOME/.cache/nova-operator-dev}; `down` kills exactly
# the PIDs `up` recorded there. `status` and `down` also look in its `light/` subdirectory, where
# `scripts/run.sh --no-openstack` keeps its control plane. Binaries come from
# tests/build-control-plane.sh (run it first).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case "${1:-}" in
  up|down|status) ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
cd "$HERE/.."
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys,json;print(json.load(sys.stdin)["target_directory"])')
# A cold build takes minutes: cargo then reports each crate (on stderr, so `eval "$(... up)"`
# still reads only the export line); a warm one stays quiet.
quiet=(--quiet)
if [ ! -x "$target/debug/nova-control-plane" ]; then
  echo "control-plane.sh: building nova-control-plane (cargo; minutes on a cold machine)" >&2
  quiet=()
fi
cargo build "${quiet[@]}" -p nova-test-harness --bin nova-control-plane
exec "$target/debug/nova-control-plane" "$@"
