#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kwok) from pinned Go modules into a cache outside the repository. A stamp file
# records what was built, so a warm machine never rebuilds. Prints the cache directory last.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/build-lib.sh"
STAMP_WANT="k8s=$K8S_VERSION kwok=$KWOK_VERSION gomod=$(hash_files "$HERE/k8s-bins/go.mod" "$HERE/k8s-bins/go.sum")"

if stamp_is "$BIN/.stamp" "$STAMP_WANT"; then
  log control-plane "warm: $BIN matches the pinned versions ($STAMP_WANT)"
  echo "$BIN"; exit 0
fi
command -v go >/dev/null || { log control-plane "go is required to build the test control plane"; exit 1; }
mkdir -p "$BIN"
rm -f "$BIN/.stamp"
start=$(date +%s)
LDF=$(k8s_ldflags)

cd "$HERE/k8s-bins"
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  timed control-plane "$cmd v$K8S_VERSION" \
    go build -trimpath -buildvcs=false -tags=selinux,notest,grpcnotrace -ldflags="$LDF" \
      -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
timed control-plane "etcd (the version k8s v$K8S_VERSION pins)" \
  go build -trimpath -buildvcs=false -ldflags="-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
timed control-plane "kwok $KWOK_VERSION" \
  bash -c 'cd "$(mktemp -d)" && GOFLAGS= GOBIN="$1" go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@$2"' \
  _ "$BIN" "$KWOK_VERSION"

# kwok v0.8.0 has no built-in stages: keep the upstream fast node/pod stages beside the binary.
KW=$(go_module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")
mkdir -p "$BIN/kwok-stages"
cp "$KW/kustomize/stage/node/fast/node-initialize.yaml" \
   "$KW/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
   "$KW/kustomize/stage/pod/fast/pod-ready.yaml" \
   "$KW/kustomize/stage/pod/fast/pod-complete.yaml" \
   "$KW/kustomize/stage/pod/fast/pod-delete.yaml" "$BIN/kwok-stages/"
chmod u+w "$BIN/kwok-stages/"*

"$BIN/kube-apiserver" --version >&2
echo "$STAMP_WANT" > "$BIN/.stamp"
log control-plane "cold build finished in $(( $(date +%s) - start ))s"
echo "$BIN"
