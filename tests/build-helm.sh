#!/usr/bin/env bash
# Builds helm from its pinned Go module (tests/helm-bins) into a cache outside the repository,
# for the chart's tests and the main job. A stamp records what was built, so a warm machine
# returns at once. Prints the path of the helm binary last.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/build-lib.sh"
HELM_DIR=${NOVA_HELM_DIR:-$HOME/.cache/nova-operator-helm/$HELM_VERSION}
STAMP_WANT="helm=$HELM_VERSION gomod=$(hash_files "$HERE/helm-bins/go.mod" "$HERE/helm-bins/go.sum")"

if stamp_is "$HELM_DIR/.stamp" "$STAMP_WANT" && [ -x "$HELM_DIR/helm" ]; then
  log helm "warm: $HELM_DIR matches the pinned version ($STAMP_WANT)"
  echo "$HELM_DIR/helm"; exit 0
fi
command -v go >/dev/null || { log helm "go is required to build helm"; exit 1; }
mkdir -p "$HELM_DIR"
rm -f "$HELM_DIR/.stamp"
grep -q "helm.sh/helm/v4 $HELM_VERSION " "$HERE/helm-bins/go.mod" \
  || { log helm "tests/helm-bins/go.mod does not require helm.sh/helm/v4 $HELM_VERSION (versions.env)"; exit 1; }
cd "$HERE/helm-bins"
timed helm "helm $HELM_VERSION" \
  nice -n 10 go build -trimpath -buildvcs=false \
    -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    -o "$HELM_DIR/helm" helm.sh/helm/v4/cmd/helm
"$HELM_DIR/helm" version --short >&2
echo "$STAMP_WANT" > "$HELM_DIR/.stamp"
echo "$HELM_DIR/helm"
