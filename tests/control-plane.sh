#!/usr/bin/env bash
# Brings the test control plane up in the background (or down, or reports its status) for
# manual use: `eval "$(tests/control-plane.sh up)"` exports KUBECONFIG. State, certificates and
# component logs live in ${NOVA_DEV_STATE:-$HOME/.cache/nova-operator-dev}; `down` kills exactly
# the PIDs `up` recorded there. Binaries come from tests/build-control-plane.sh (run it first).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case "${1:-}" in
  up|down|status) ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
cd "$HERE/.."
cargo build --quiet -p nova-test-harness --bin nova-control-plane
exec "$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys,json;print(json.load(sys.stdin)["target_directory"])')/debug/nova-control-plane" "$@"
