#!/usr/bin/env bash
# Collects the real upstream CRDs of the operators the Nova operator reads or writes from their
# pinned Go modules into tests/crds/third-party/ (committed, so tests never need the network),
# and those only the Helm chart's optional objects need (cert-manager, the Prometheus
# operator) into tests/crds/chart/, which only the chart's tests install.
# Re-run after changing a version below and commit the result. Kinds that no served module
# ships are hand-written minimal stand-ins in the same directory (their header says so); this
# script leaves them alone.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=

# module@version | path inside the module (one CRD file each)
SOURCES=(
  "github.com/mariadb-operator/mariadb-operator@v0.38.1 config/crd/bases/k8s.mariadb.com_mariadbs.yaml"
  "github.com/mariadb-operator/mariadb-operator@v0.38.1 config/crd/bases/k8s.mariadb.com_databases.yaml"
  "github.com/mariadb-operator/mariadb-operator@v0.38.1 config/crd/bases/k8s.mariadb.com_users.yaml"
  "github.com/mariadb-operator/mariadb-operator@v0.38.1 config/crd/bases/k8s.mariadb.com_grants.yaml"
  "github.com/external-secrets/external-secrets@v0.16.2 config/crds/bases/external-secrets.io_clustersecretstores.yaml"
  "github.com/external-secrets/external-secrets@v0.16.2 config/crds/bases/external-secrets.io_secretstores.yaml"
  "github.com/external-secrets/external-secrets@v0.16.2 config/crds/bases/external-secrets.io_externalsecrets.yaml"
  "sigs.k8s.io/gateway-api@v1.6.3 config/crd/standard/gateway.networking.k8s.io_gatewayclasses.yaml"
  "sigs.k8s.io/gateway-api@v1.6.3 config/crd/standard/gateway.networking.k8s.io_gateways.yaml"
  "sigs.k8s.io/gateway-api@v1.6.3 config/crd/standard/gateway.networking.k8s.io_httproutes.yaml"
  "k8s.io/autoscaler/vertical-pod-autoscaler@v1.8.1 deploy/vpa-v1-crd-gen.yaml"
  "github.com/rabbitmq/cluster-operator/v2@v2.16.0 config/crd/bases/rabbitmq.com_rabbitmqclusters.yaml"
  "github.com/cobaltcore-dev/openstack-hypervisor-operator@v1.0.0 charts/openstack-hypervisor-operator/crds/kvm.cloud.sap_hypervisors.yaml"
)
CHART_SOURCES=(
  "github.com/cert-manager/cert-manager@v1.21.2 deploy/crds/cert-manager.io_issuers.yaml"
  "github.com/cert-manager/cert-manager@v1.21.2 deploy/crds/cert-manager.io_clusterissuers.yaml"
  "github.com/cert-manager/cert-manager@v1.21.2 deploy/crds/cert-manager.io_certificates.yaml"
  "github.com/prometheus-operator/prometheus-operator@v0.85.0 example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
  "github.com/prometheus-operator/prometheus-operator@v0.85.0 example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"
)

log() { printf '[collect-crds %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
command -v go >/dev/null || { log "go is required"; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

declare -A DIRS=()
# collect OUT_DIR ENTRY...
collect() {
  local out=$1 entry mv path src dest; shift
  mkdir -p "$out"
  for entry in "$@"; do
    mv=${entry%% *}; path=${entry#* }
    if [ -z "${DIRS[$mv]:-}" ]; then
      log "downloading $mv"
      DIRS[$mv]=$(cd "$scratch" && go mod download -json "$mv" \
        | python3 -c 'import sys,json;j=json.load(sys.stdin);e=j.get("Error");print(j["Dir"]) if not e else sys.exit(e)')
    fi
    src="${DIRS[$mv]}/$path"
    dest="$out/$(basename "$path")"
    { printf '# Source: %s %s\n# Collected by tests/collect-crds.sh from the Go module; do not edit.\n' "$mv" "$path"
      cat "$src"; } > "$dest"
    chmod 0644 "$dest"
    log "wrote $(basename "$dest") ($(wc -c < "$dest") bytes)"
  done
  log "done: $(ls "$out" | wc -l) files, $(du -sh "$out" | cut -f1) in $out"
}
collect "$HERE/crds/third-party" "${SOURCES[@]}"
collect "$HERE/crds/chart" "${CHART_SOURCES[@]}"
