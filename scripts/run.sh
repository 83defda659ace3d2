#!/usr/bin/env bash
# The main job. By default: builds everything (the test control plane, the real node, helm,
# the OpenStack images and the operator's own images; a cold machine takes about an hour and
# every step logs its progress), starts the control plane with the real node and a real
# OpenStack (MariaDB, RabbitMQ, memcached, Keystone, Placement), runs the SIMULATED MariaDB,
# RabbitMQ and External Secrets operators (and a SIMULATED Gateway controller that accepts the
# sample's console route) against it, installs the operator with its own Helm
# chart (nova-webhook and nova-controller as pods on the real node, admission through the
# webhook's Service), applies the sample Nova and NovaCompute (the real node labelled so the
# pool selects it, its OVN chassis SIMULATED) and shows their conditions and the pool's nodes
# live. With a terminal it runs until Ctrl-C; without one it exits 0 once the Nova is Ready and
# the pool Ready with its nodes Active (nova-compute registered, the host mapped), or 1 naming
# what keeps them from it (after NOVA_RUN_TIMEOUT seconds, or once the controller has settled
# and a condition no step of this build sets is missing), or 1 when the controller's log shows
# a request its chart's RBAC denied. Ctrl-C (or the end) tears everything down.
#
# --no-openstack: the lighter mode for machines without the OpenStack install: the kwok-only
# control plane, nova-webhook and nova-controller as local processes (admission registered by
# URL), the sample's inputs and the other operators' statuses written by this script.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODE=full
for arg in "$@"; do
  case $arg in
    --no-openstack) MODE=light ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
STATE=${NOVA_DEV_STATE:-$HOME/.cache/nova-operator-dev}
# tests/control-plane.sh keeps the light mode's control plane in NOVA_DEV_STATE; the full
# mode's is in $STATE/serve; this script's logs and files in $STATE/run.
export NOVA_DEV_STATE=$STATE/light
TIMEOUT=${NOVA_RUN_TIMEOUT:-900}
RELEASE=2026.1
RUN=$STATE/run
log() { printf '[run %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
timed() { local t; t=$(date +%s); "$@"; log "$1 took $(( $(date +%s) - t ))s"; }

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
mkdir -p "$RUN"
started=$(date +%s)
pids=()
cleanup() {
  [ "$BASHPID" = "$$" ] || return 0 # a background subshell inherits the trap
  log "stopping"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ "$MODE" = light ] && { tests/control-plane.sh down >/dev/null 2>&1 || true; }
  log "stopped"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The view: a redrawn table under the phases reached so far on a terminal, a new print on every
# change otherwise. Arguments: view.py's options. Returns when view.py's goal is reached
# (0) or, without a terminal, when it cannot get there (1, naming what it still waits for).
phases=""
watch_conditions() {
  local last="" out rc since=$SECONDS deadline=$((SECONDS + TIMEOUT)) applied novas_ready=""
  applied=$(date +%s)
  while :; do
    rc=0
    out=$("$KUBECTL" -n openstack get novas,novacomputes -o json 2>/dev/null | python3 scripts/view.py "$RUN/conditions" "$@") || rc=$?
    if [ -z "$novas_ready" ] && { [ "$rc" = 0 ] || [ "$rc" = 3 ]; }; then
      novas_ready=$(date +%s)
      phase "the sample Nova is Ready $((novas_ready - applied))s after it was applied"
    fi
    if [ "$rc" = 0 ] && [ "$*" = --pools-active ]; then
      phase "the sample pool is Ready with its nodes Active $(( $(date +%s) - novas_ready ))s after the Nova"
    fi
    if [ "$out" != "$last" ] || [ "$rc" = 0 ]; then
      since=$SECONDS
      # A terminal's redrawn screen repeats the phases logged so far; a log has them once.
      local header=""
      if [ -t 1 ]; then printf '\033[H\033[2J'; header=$phases; fi
      printf '[%s] %s mode, %ss since start\n%s%s\n' "$(date +%H:%M:%S)" "$MODE" "$(( $(date +%s) - started ))" "$header" "$out"
      last=$out
    fi
    [ "$rc" = 0 ] && return 0
    if [ ! -t 0 ]; then
      if [ "$rc" = 2 ] && [ $((SECONDS - since)) -ge 60 ]; then
        log "the controller has settled; Ready needs conditions no step of this build sets yet (above)"
        return 1
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        log "timed out after ${TIMEOUT}s, ${out##*$'\n'}"
        return 1
      fi
    fi
    sleep 2
  done
}

# Logs a phase reached and keeps it for the view's header.
phase() {
  log "$1"
  phases+="  $1"$'\n'
}

# The sample exposes its console through the Gateway openstack-gw, and no Gateway controller
# runs here: a SIMULATED one accepts every HTTPRoute in namespace openstack that has no parent
# status yet (nothing routes traffic to it).
simulated_gateway() {
  while :; do
    "$KUBECTL" -n openstack get httproutes -o json 2>/dev/null | python3 -c '
import json, sys
for route in json.load(sys.stdin)["items"]:
    if (route.get("status") or {}).get("parents"):
        continue
    print(route["metadata"]["name"], route["metadata"].get("generation", 1), json.dumps(route["spec"]["parentRefs"][0]))
' | while read -r name generation parent; do
      log "SIMULATED gateway controller: accepting HTTPRoute openstack/$name"
      "$KUBECTL" -n openstack patch httproute "$name" --subresource=status --type=merge -p '{"status":{"parents":[{"parentRef":'"$parent"',"controllerName":"nova.c5c3.io/simulated-gateway","conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"simulated gateway controller: accepted, nothing routes traffic","lastTransitionTime":"'"$(date -u +%Y-%m-%dT%H:%M:%SZ)"'","observedGeneration":'"$generation"'}]}]}}' >/dev/null || true
    done
    sleep 3
  done
}

# Applies a manifest, retrying while admission may not see the webhook configuration yet.
apply_admitted() {
  for _ in $(seq 30); do "$KUBECTL" apply -f "$1" >/dev/null 2>&1 && return 0; sleep 1; done
  "$KUBECTL" apply -f "$1"
}

# Prints a manifest patched offline: local_patch FILE merge|json PATCH [OUTPUT].
local_patch() {
  "$KUBECTL" patch --local -f "$1" --type="$2" -p "$3" -o "${4:-yaml}"
}

# The controller runs under the chart's ServiceAccount: nothing it asked for was forbidden
# (a denied request logs the API error's reason and code).
forbidden_in_controller_log() {
  local denied
  denied=$("$KUBECTL" -n nova-system logs -l app.kubernetes.io/component=controller --tail=-1 \
    | grep -E 'forbidden|Forbidden|code: 403|"code":403' || true)
  [ -z "$denied" ] && { log "the controller's log has no 403"; return 0; }
  log "the controller was denied under the chart's RBAC:"$'\n'"$denied"
  return 1
}

next_steps() {
  log "look next: $KUBECTL get novas,novacomputes -A   (KUBECONFIG=$KUBECONFIG)"
  log "metrics: $1"
  log "dashboard: charts/nova-operator/dashboards/nova-operator.json (uid nova-operator; installed as a ConfigMap by the chart)"
}

light() {
  NOVA_TESTBIN=$(tests/build-control-plane.sh)
  export NOVA_TESTBIN
  KUBECTL="$NOVA_TESTBIN/kubectl"
  local webhook=127.0.0.1:9443 target
  log "building the binaries"
  cargo build --locked -q -p nova-webhook -p nova-controller -p nova-certs -p nova-test-harness --bins
  target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys,json;print(json.load(sys.stdin)["target_directory"])')/debug
  "$target/nova-controller" conditions >"$RUN/conditions"
  tests/control-plane.sh down >/dev/null 2>&1 || true
  eval "$(tests/control-plane.sh up)"

  log "generating the webhook's serving certificate"
  "$target/nova-certs" --out "$RUN/webhook-certs" --san 127.0.0.1 --san localhost >/dev/null
  "$target/nova-webhook" --bind-address "$webhook" --metrics-bind-address 127.0.0.1:9080 \
    --tls-cert-file "$RUN/webhook-certs/tls.crt" --tls-private-key-file "$RUN/webhook-certs/tls.key" \
    --kubeconfig "$KUBECONFIG" >"$RUN/webhook.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do curl -fs http://127.0.0.1:9080/readyz >/dev/null 2>&1 && break; sleep 0.2; done

  log "registering the admission webhooks by URL"
  local ca; ca=$(base64 -w0 <"$RUN/webhook-certs/ca.crt")
  hook() { # name path resource
    printf -- '- name: %s\n  clientConfig: {url: "https://%s/%s", caBundle: "%s"}\n' "$1" "$webhook" "$2" "$ca"
    printf '  rules: [{apiGroups: [nova.openstack.c5c3.io], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [%s], scope: Namespaced}]\n' "$3"
    printf '  admissionReviewVersions: [v1]\n  sideEffects: None\n  failurePolicy: Fail\n  timeoutSeconds: 10\n'
  }
  {
    printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: nova-operator}\nwebhooks:\n'
    hook mnova.kb.io mutate-nova-openstack-c5c3-io-v1alpha1-nova novas
    hook mnovacompute.kb.io mutate-nova-openstack-c5c3-io-v1alpha1-novacompute novacomputes
    printf -- '---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: nova-operator}\nwebhooks:\n'
    hook vnova.kb.io validate-nova-openstack-c5c3-io-v1alpha1-nova novas
    hook vnovacompute.kb.io validate-nova-openstack-c5c3-io-v1alpha1-novacompute novacomputes
  } | "$KUBECTL" apply -f - >/dev/null

  log "starting nova-controller"
  "$target/nova-controller" --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --metrics-bind-address 127.0.0.1:8080 --health-probe-bind-address 127.0.0.1:8081 >"$RUN/controller.log" 2>&1 &
  pids+=($!)

  log "applying the sample Nova and its inputs; the other operators' statuses are written by this script (SIMULATED)"
  "$KUBECTL" create namespace openstack >/dev/null
  "$KUBECTL" apply -f examples/dev/inputs.yaml >/dev/null
  "$KUBECTL" patch clustersecretstore openbao-cluster-store --subresource=status --type=merge \
    -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Valid","message":"simulated external-secrets: development store"}]}}' >/dev/null
  "$KUBECTL" -n openstack patch rabbitmqcluster openstack-rabbitmq --subresource=status --type=merge \
    -p '{"status":{"conditions":[],"defaultUser":{"secretReference":{"name":"openstack-rabbitmq-default-user","namespace":"openstack","keys":{"username":"username","password":"password"}}}}}' >/dev/null
  apply_admitted examples/nova.yaml
  apply_admitted examples/novacompute.yaml
  local rc=0
  watch_conditions || rc=$?
  log "logs: $RUN/{webhook,controller}.log"
  next_steps "http://127.0.0.1:8080/metrics (controller), http://127.0.0.1:9080/metrics (webhook)"
  [ -t 0 ] && [ "$rc" = 0 ] && { log "running; press Ctrl-C to stop"; wait; }
  return "$rc"
}

full() {
  log "building (a cold machine: host packages ~1 min, control plane ~25 min, node ~14 min, OpenStack images ~20 min beside them, operator images ~9 min)"
  timed tests/install-host-packages.sh
  tests/build-images.sh >"$RUN/build-images.log" 2> >(grep --line-buffered '^\[images build' >&2) &
  local images=$!
  NOVA_TESTBIN=$(timed tests/build-control-plane.sh)
  export NOVA_TESTBIN
  KUBECTL="$NOVA_TESTBIN/kubectl"
  timed tests/build-node.sh >/dev/null
  local helm; helm=$(timed tests/build-helm.sh)
  wait "$images" || { log "tests/build-images.sh failed"; exit 1; }
  timed images/build.sh >/dev/null
  cargo build --locked -q -p nova-test-harness --bin nova-control-plane
  local target; target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys,json;print(json.load(sys.stdin)["target_directory"])')/debug
  # What the chart's controller image implements (the same source, built by images/build.sh).
  "${NOVA_IMAGES_DIR:-$HOME/.cache/nova-operator-images}/cargo-target/x86_64-unknown-linux-gnu/release/nova-controller" conditions >"$RUN/conditions"
  log "everything built in $(( $(date +%s) - started ))s"

  log "starting the control plane, the real node and OpenStack $RELEASE (logs: $RUN/serve.log)"
  tests/control-plane.sh down >/dev/null 2>&1 || true
  local serving node_up="" waited
  serving=$(date +%s)
  # tee empties serve.log only once it runs: the wait below must not read the last run's.
  : >"$RUN/serve.log"
  "$target/nova-control-plane" --state-dir "$STATE/serve" serve --openstack "$RELEASE" \
    --service-user-secret openstack/nova-keystone >"$RUN/serve.out" 2> >(tee "$RUN/serve.log" >&2) &
  pids+=($!)
  until grep -qx ready "$RUN/serve.out" 2>/dev/null; do
    kill -0 "${pids[0]}" 2>/dev/null || { log "the control plane did not start (above)"; exit 1; }
    if [ -z "$node_up" ] && grep -q 'real node up' "$RUN/serve.log" 2>/dev/null; then
      node_up=$(date +%s)
      waited=$(sed -n 's/.*got the real node lock after \([0-9]*\).*/\1/p' "$RUN/serve.log")
      phase "the control plane and the real node are up in $((node_up - serving))s${waited:+ (${waited}s of it waiting for the node lock)}"
    fi
    sleep 1
  done
  phase "OpenStack $RELEASE is up in $(( $(date +%s) - ${node_up:-$serving} ))s"
  eval "$(grep '^export KUBECONFIG=' "$RUN/serve.out")"
  export HELM_CACHE_HOME=$RUN/helm/cache HELM_CONFIG_HOME=$RUN/helm/config HELM_DATA_HOME=$RUN/helm/data

  log "installing the operator with its Helm chart (release nova-operator in nova-system)"
  local charting; charting=$(date +%s)
  "$helm" install nova-operator charts/nova-operator --namespace nova-system --create-namespace \
    --wait --timeout 5m --kubeconfig "$KUBECONFIG" >/dev/null
  phase "the chart is installed, both Deployments Available, in $(( $(date +%s) - charting ))s"
  "$KUBECTL" -n nova-system get deployments,pods

  log "applying the sample's inputs; the MariaDB, RabbitMQ and External Secrets operators are SIMULATED"
  local pw; pw() { head -c 18 /dev/urandom | base64 | tr '+/' '-_'; }
  cat <<YAML | "$KUBECTL" apply -f - >/dev/null
apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {name: openbao-cluster-store, labels: {nova.c5c3.io/simulated: "true"}}
spec: {provider: {fake: {data: []}}}
---
apiVersion: v1
kind: Secret
metadata: {name: nova-api-db, namespace: openstack}
stringData: {username: nova-api, password: "$(pw)"}
---
apiVersion: v1
kind: Secret
metadata: {name: nova-db, namespace: openstack}
stringData: {username: nova, password: "$(pw)"}
---
apiVersion: v1
kind: Secret
metadata: {name: nova-metadata-secret, namespace: openstack}
stringData: {shared_secret: "$(pw)"}
---
apiVersion: rabbitmq.com/v1beta1
kind: RabbitmqCluster
metadata: {name: openstack-rabbitmq, namespace: openstack, labels: {nova.c5c3.io/simulated: "true"}}
spec: {}
---
apiVersion: k8s.mariadb.com/v1alpha1
kind: MariaDB
metadata: {name: openstack-mariadb, namespace: openstack, labels: {nova.c5c3.io/simulated: "true"}}
spec: {}
YAML
  # The simulated mariadb-operator serves schemas, users and grants; the cluster object itself
  # stands for the real MariaDB Deployment of the OpenStack install.
  "$KUBECTL" -n openstack patch mariadb openstack-mariadb --subresource=status --type=merge \
    -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Simulated","lastTransitionTime":"'"$(date -u +%Y-%m-%dT%H:%M:%SZ)"'","message":"simulated mariadb-operator: the MariaDB Deployment openstack/openstack-mariadb of the real OpenStack"}]}}' >/dev/null
  # The node has no registry: the samples' tag-pinned images render imagePullPolicy Always,
  # which it cannot satisfy, so each sample names the node's image by its digest (IfNotPresent).
  # The Nova's scheduler does not discover hosts periodically (extraConfig): the pool's
  # nova-discover-hosts Job maps the node, which the periodic would race (novacompute_real).
  local nova_image compute_image
  nova_image=$("$target/nova-control-plane" pinned "ghcr.io/c5c3/nova:$RELEASE")
  compute_image=$("$target/nova-control-plane" pinned "ghcr.io/c5c3/nova-compute:$RELEASE")
  local_patch examples/nova.yaml merge '{"spec":{"image":{"tag":null,"digest":"'"${nova_image#*@}"'"},
    "extraConfig":{"scheduler":{"discover_hosts_in_cells_interval":"-1"}}}}' >"$RUN/nova.yaml"
  # The pool runs the real nova-compute (the sample's fake driver) on the real node, which its
  # nodeSelector selects once labelled, in a zone of its own. No hypervisor operator runs here,
  # so the pool declares no traits (they would wait for the node's Hypervisor).
  local_patch examples/novacompute.yaml merge '{"spec":{"image":{"repository":"'"${compute_image%@*}"'",
    "digest":"'"${compute_image#*@}"'"},"traits":null,"hostTraits":null}}' >"$RUN/novacompute.yaml"
  local selector
  selector=$(local_patch "$RUN/novacompute.yaml" merge '{}' \
    'go-template={{range $k, $v := .spec.nodeSelector}}{{$k}}={{$v}} {{end}}')
  # shellcheck disable=SC2086 # one argument per label
  "$KUBECTL" label node -l nova.c5c3.io/test-node=real $selector topology.kubernetes.io/zone=zone-a >/dev/null
  log "the real node is labelled ${selector}topology.kubernetes.io/zone=zone-a for the sample pool"
  # Its OVN chassis is SIMULATED (the node runs no Open vSwitch): the harness's manifest, a pod
  # answering the pool's wait-for-chassis gate on the host's OVSDB socket.
  local_patch tests/src/simulated-ovn-chassis.yaml json '[
    {"op":"replace","path":"/metadata/namespace","value":"openstack"},
    {"op":"replace","path":"/spec/containers/0/image","value":"'"$nova_image"'"}]' | "$KUBECTL" apply -f - >/dev/null
  log "SIMULATED OVN chassis: pod openstack/simulated-ovn-chassis answers the pool's chassis gate"
  apply_admitted "$RUN/nova.yaml"
  apply_admitted "$RUN/novacompute.yaml"
  simulated_gateway &
  pids+=($!)
  local rc=0
  watch_conditions --pools-active || rc=$?
  forbidden_in_controller_log || rc=1
  local ip
  ip=$("$KUBECTL" -n nova-system get pods -l app.kubernetes.io/component=controller -o jsonpath='{.items[0].status.podIP}')
  next_steps "http://$ip:8080/metrics (the controller pod, reachable from this machine over the node's bridge)"
  [ -t 0 ] && [ "$rc" = 0 ] && { log "running; press Ctrl-C to stop"; wait "${pids[0]}"; }
  return "$rc"
}

"$MODE"
