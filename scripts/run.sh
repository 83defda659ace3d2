#!/usr/bin/env bash
# The main job: builds the CRDs and both binaries, brings up the local test control plane,
# generates the webhook's serving certificate, starts nova-webhook and nova-controller against
# it (admission registered by URL), and applies the sample Nova with the inputs it waits for.
# Interactive: runs until Ctrl-C. Without a terminal: prints the result and tears down.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
STATE=${NOVA_DEV_STATE:-$HOME/.cache/nova-operator-dev}
export NOVA_DEV_STATE=$STATE
WEBHOOK=127.0.0.1:9443
log() { printf '[run %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
NOVA_TESTBIN=$(tests/build-control-plane.sh)
export NOVA_TESTBIN
KUBECTL="$NOVA_TESTBIN/kubectl"

log "building the CRDs and the binaries"
cargo build --locked -q -p nova-api -p nova-webhook -p nova-controller -p nova-certs -p nova-test-harness --bins
TARGET=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys,json;print(json.load(sys.stdin)["target_directory"])')/debug
"$TARGET/crdgen" >/dev/null

pids=()
cleanup() {
  log "stopping"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  tests/control-plane.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT

tests/control-plane.sh down >/dev/null 2>&1 || true
eval "$(tests/control-plane.sh up)"
mkdir -p "$STATE/run"

log "generating the webhook's serving certificate"
"$TARGET/nova-certs" --out "$STATE/run/webhook-certs" --san 127.0.0.1 --san localhost >/dev/null
"$TARGET/nova-webhook" --bind-address "$WEBHOOK" --metrics-bind-address 127.0.0.1:9080 \
  --tls-cert-file "$STATE/run/webhook-certs/tls.crt" --tls-private-key-file "$STATE/run/webhook-certs/tls.key" \
  --kubeconfig "$KUBECONFIG" >"$STATE/run/webhook.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -fs http://127.0.0.1:9080/readyz >/dev/null 2>&1 && break; sleep 0.2; done

log "registering the admission webhooks by URL"
CA=$(base64 -w0 <"$STATE/run/webhook-certs/ca.crt")
webhook() { # kind-prefix name path resource
  cat <<YAML
- name: $2
  clientConfig: {url: "https://$WEBHOOK/$3", caBundle: "$CA"}
  rules: [{apiGroups: [nova.openstack.c5c3.io], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [$4], scope: Namespaced}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
YAML
}
{
  echo "apiVersion: admissionregistration.k8s.io/v1"; echo "kind: MutatingWebhookConfiguration"
  echo "metadata: {name: nova-operator}"; echo "webhooks:"
  webhook m mnova.kb.io mutate-nova-openstack-c5c3-io-v1alpha1-nova novas
  webhook m mnovacompute.kb.io mutate-nova-openstack-c5c3-io-v1alpha1-novacompute novacomputes
  echo "---"
  echo "apiVersion: admissionregistration.k8s.io/v1"; echo "kind: ValidatingWebhookConfiguration"
  echo "metadata: {name: nova-operator}"; echo "webhooks:"
  webhook v vnova.kb.io validate-nova-openstack-c5c3-io-v1alpha1-nova novas
  webhook v vnovacompute.kb.io validate-nova-openstack-c5c3-io-v1alpha1-novacompute novacomputes
} | "$KUBECTL" apply -f - >/dev/null

log "starting nova-controller"
"$TARGET/nova-controller" --kubeconfig "$KUBECONFIG" --leader-elect=false \
  --metrics-bind-address 127.0.0.1:8080 --health-probe-bind-address 127.0.0.1:8081 >"$STATE/run/controller.log" 2>&1 &
pids+=($!)

log "applying the sample Nova and the inputs it waits for"
"$KUBECTL" create namespace openstack >/dev/null
"$KUBECTL" apply -f examples/dev/inputs.yaml >/dev/null
"$KUBECTL" patch clustersecretstore openbao-cluster-store --subresource=status --type=merge \
  -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Valid","message":"development store"}]}}' >/dev/null
"$KUBECTL" -n openstack patch rabbitmqcluster openstack-rabbitmq --subresource=status --type=merge \
  -p '{"status":{"conditions":[],"defaultUser":{"secretReference":{"name":"openstack-rabbitmq-default-user","namespace":"openstack","keys":{"username":"username","password":"password"}}}}}' >/dev/null
# Admission may need a moment to see the new webhook configuration.
for _ in $(seq 30); do "$KUBECTL" apply -f examples/nova.yaml >/dev/null 2>&1 && break; sleep 1; done
"$KUBECTL" apply -f examples/nova.yaml

for _ in $(seq 60); do
  [ "$("$KUBECTL" -n openstack get nova nova -o jsonpath='{.status.conditions[?(@.type=="ComputeConfigReady")].status}')" = True ] && break
  sleep 1
done
"$KUBECTL" -n openstack get novas
"$KUBECTL" -n openstack get nova nova -o jsonpath='{range .status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.reason}{"\t"}{.message}{"\n"}{end}'
"$KUBECTL" -n openstack get configmaps,secrets -l app.kubernetes.io/instance=nova
log "logs: $STATE/run/{webhook,controller}.log; KUBECONFIG=$KUBECONFIG"
if [ -t 0 ]; then
  log "running; press Ctrl-C to stop"
  wait
fi
