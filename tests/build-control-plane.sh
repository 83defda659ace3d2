#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kwok) from pinned Go modules into a cache outside the repository. A stamp file
# records what was built, so a warm machine never rebuilds. Prints the cache directory last.
set -euo pipefail

K8S_VERSION=1.36.3
KWOK_VERSION=v0.8.0
MINOR=${K8S_VERSION#1.}; MINOR=${MINOR%%.*}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${NOVA_TESTBIN:-$HOME/.cache/nova-operator-testbin/v$K8S_VERSION}
STAMP_WANT="k8s=$K8S_VERSION kwok=$KWOK_VERSION gomod=$(sha256sum "$HERE/k8s-bins/go.mod" "$HERE/k8s-bins/go.sum" | sha256sum | cut -c1-16)"

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[control-plane build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ -f "$BIN/.stamp" ] && [ "$(cat "$BIN/.stamp")" = "$STAMP_WANT" ]; then
  log "warm: $BIN matches the pinned versions ($STAMP_WANT)"
  echo "$BIN"; exit 0
fi
command -v go >/dev/null || { log "go is required to build the test control plane"; exit 1; }
mkdir -p "$BIN"
rm -f "$BIN/.stamp"
start=$(date +%s)

LDF="-s -w"
for kv in gitVersion=v$K8S_VERSION gitMajor=1 gitMinor=$MINOR gitTreeState=clean \
          gitCommit=0000000000000000000000000000000000000000 \
          buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ); do
  LDF="$LDF -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done

cd "$HERE/k8s-bins"
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  t=$(date +%s)
  log "building $cmd v$K8S_VERSION"
  go build -trimpath -buildvcs=false -tags=selinux,notest,grpcnotrace -ldflags="$LDF" \
    -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
  log "built $cmd in $(( $(date +%s) - t ))s"
done

t=$(date +%s)
log "building etcd (the version k8s v$K8S_VERSION pins)"
go build -trimpath -buildvcs=false -ldflags="-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
log "built etcd in $(( $(date +%s) - t ))s"

t=$(date +%s)
log "building kwok $KWOK_VERSION"
( cd "$(mktemp -d)" && GOFLAGS= GOBIN="$BIN" go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" )
log "built kwok in $(( $(date +%s) - t ))s"

# kwok v0.8.0 has no built-in stages: keep the upstream fast node/pod stages beside the binary.
KW=$(cd "$(mktemp -d)" && GOFLAGS= go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import sys,json;print(json.load(sys.stdin)["Dir"])')
mkdir -p "$BIN/kwok-stages"
cp "$KW/kustomize/stage/node/fast/node-initialize.yaml" \
   "$KW/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
   "$KW/kustomize/stage/pod/fast/pod-ready.yaml" \
   "$KW/kustomize/stage/pod/fast/pod-complete.yaml" \
   "$KW/kustomize/stage/pod/fast/pod-delete.yaml" "$BIN/kwok-stages/"
chmod u+w "$BIN/kwok-stages/"*

"$BIN/kube-apiserver" --version >&2
echo "$STAMP_WANT" > "$BIN/.stamp"
log "cold build finished in $(( $(date +%s) - start ))s"
echo "$BIN"
