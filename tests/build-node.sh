#!/usr/bin/env bash
# Builds the real test node's binaries from pinned sources into the control plane's cache
# directory: kubelet and kube-proxy (node-bins, the control plane's k8s.io/kubernetes set),
# containerd with its runc shim and ctr (containerd-bins) and CoreDNS (the pause image is
# tests/build-images.sh's). runc, the CNI plugins and
# nftables come from Debian (HOST_PACKAGES in versions.env). Its own stamp (.stamp-node), so
# the control plane is never rebuilt for it. Prints the cache directory last.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/build-lib.sh"
STAMP="$BIN/.stamp-node"
STAMP_WANT="k8s=$K8S_VERSION containerd=$CONTAINERD_VERSION coredns=$COREDNS_VERSION\
 node-gomod=$(hash_files "$HERE/node-bins/go.mod" "$HERE/node-bins/go.sum")\
 containerd-gomod=$(hash_files "$HERE/containerd-bins/go.mod" "$HERE/containerd-bins/go.sum")"

if stamp_is "$STAMP" "$STAMP_WANT"; then
  log node "warm: $BIN matches the pinned versions ($STAMP_WANT)"
  echo "$BIN"; exit 0
fi
command -v go >/dev/null || { log node "go is required to build the test node"; exit 1; }
mkdir -p "$BIN"
rm -f "$STAMP"
start=$(date +%s)
LDF=$(k8s_ldflags)

cd "$HERE/node-bins"
for cmd in kubelet kube-proxy; do
  timed node "$cmd v$K8S_VERSION" \
    go build -trimpath -buildvcs=false -tags=selinux,notest,grpcnotrace -ldflags="$LDF" \
      -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done

cd "$HERE/containerd-bins"
CTD_LDF="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
for cmd in containerd containerd-shim-runc-v2 ctr; do
  timed node "$cmd $CONTAINERD_VERSION" \
    go build -trimpath -buildvcs=false -tags=no_btrfs,no_devmapper,no_zfs -ldflags="$CTD_LDF" \
      -o "$BIN/$cmd" "github.com/containerd/containerd/v2/cmd/$cmd"
done

timed node "coredns $COREDNS_VERSION" \
  bash -c 'cd "$(mktemp -d)" && GOFLAGS= GOBIN="$1" go install -trimpath -ldflags="-s -w" "github.com/coredns/coredns@$2"' \
  _ "$BIN" "$COREDNS_VERSION"

"$BIN/kubelet" --version >&2
"$BIN/containerd" --version >&2
echo "$STAMP_WANT" > "$STAMP"
log node "cold build finished in $(( $(date +%s) - start ))s"
echo "$BIN"
