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
# live. Without a terminal it exits 0 once the Nova is Ready and the pool Ready with its nodes
# Active (nova-compute registered, the host mapped); with one it then runs until Ctrl-C. Either
# way it exits 1 naming what keeps them from it after NOVA_RUN_TIMEOUT seconds (default 900),
# or once the controller has settled and a condition no step of this build sets is missing,
# or when the controller's log shows a request its chart's RBAC denied. Ctrl-C (or the end)
# tears everything down, also when the output goes through a pipe that Ctrl-C closed (| tee).
#
# --no-openstack: the lighter mode for machines without the OpenStack install: the kwok-only
# control plane, nova-webhook and nova-controller as local processes (admission registered by
# URL), the sample's inputs written by this script, and the other operators SIMULATED by it,
# statuses only (nothing runs behind them): the MariaDB cluster, Database, User and Grant
# Ready, the RabbitmqCluster's default user, the secret store Ready, the console HTTPRoute
# Accepted, and a nova-api root document on 127.0.0.1 for the controller's health probe. Its
# control plane is the one `tests/control-plane.sh status|down` finds in the state's light/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODE=full
for arg in "$@"; do
  case $arg in
    --no-openstack) MODE=light ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
STATE=${NOVA_DEV_STATE:-$HOME/.cache/nova-operator-dev}
# The light mode's control plane is in $STATE/light (where `tests/control-plane.sh status|down`
# look besides $STATE), the full mode's in $STATE/serve, this script's logs and files in
# $STATE/run.
export NOVA_DEV_STATE=$STATE/light
TIMEOUT=${NOVA_RUN_TIMEOUT:-900}
RELEASE=2026.1
RUN=$STATE/run
# Writes to stderr; a failed write (a closed pipe) is ignored rather than fatal, so the teardown
# that logs its steps always runs to its end.
log() { printf '[run %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2 2>/dev/null || true; }
say() { printf '%s\n' "$@" >&2 2>/dev/null || true; }
timed() { local t; t=$(date +%s); "$@"; log "$1 took $(( $(date +%s) - t ))s"; }

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
mkdir -p "$RUN"
started=$(date +%s)
pids=()
# The light mode's nova-control-plane, once built (the teardown calls it directly).
CONTROL_PLANE=""

# Whether a child of this script still runs (a zombie, exited but not reaped, does not).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Stops what this script started: its children (SIGTERM; SIGKILL only after 120 s, since the
# full mode's nova-control-plane serve tears down OpenStack, the node and the control plane) and
# the light mode's control plane (`down`: etcd, kube-apiserver, controller-manager, scheduler,
# kwok).
# Nothing may cut it short: Ctrl-C also kills the reader of `| tee`, so every write may meet a
# closed pipe (SIGPIPE would kill the shell mid-way), a second Ctrl-C may come, a step may fail.
cleanup() {
  local rc=$?
  [ "$BASHPID" = "$$" ] || return 0 # a background subshell inherits the trap
  trap '' PIPE INT TERM HUP
  set +e
  log "stopping"
  local pid deadline=$((SECONDS + 120))
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    while running "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [ "$MODE" = light ]; then
    if [ -n "$CONTROL_PLANE" ]; then
      "$CONTROL_PLANE" down >/dev/null 2>&1
    else
      tests/control-plane.sh down >/dev/null 2>&1
    fi
  fi
  log "stopped"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
# A closed output (the reader of a pipe gone) ends the run through the teardown instead of
# killing the shell on its next write.
trap 'exit 141' PIPE

# The view: a redrawn table under the phases reached so far on a terminal, a new print on every
# change otherwise. Arguments: view.py's options. Returns when view.py's goal is reached (0) or
# when it cannot get there (1, naming what it still waits for): the controller has settled
# short of a condition no step of this build sets, or NOVA_RUN_TIMEOUT seconds have passed.
phases=""
# What a user needs at hand (KUBECONFIG, kubectl, logs), above the redrawn view too.
usage=""
watch_conditions() {
  local last="" out rc since=$SECONDS deadline=$((SECONDS + TIMEOUT)) applied novas_ready=""
  applied=$(date +%s)
  while :; do
    rc=0
    out=$("$KUBECTL" -n openstack get novas,novacomputes -o json --request-timeout=10s 2>/dev/null | python3 scripts/view.py "$RUN/conditions" "$@") || rc=$?
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
      if [ -t 1 ]; then printf '\033[H\033[2J'; header=$usage$phases; fi
      printf '[%s] %s mode, %ss since start\n%s%s\n' "$(date +%H:%M:%S)" "$MODE" "$(( $(date +%s) - started ))" "$header" "$out"
      last=$out
    fi
    [ "$rc" = 0 ] && return 0
    if [ "$rc" = 2 ] && [ $((SECONDS - since)) -ge 60 ]; then
      log "the controller has settled; Ready needs conditions no step of this build sets yet (above)"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "timed out after ${TIMEOUT}s (NOVA_RUN_TIMEOUT), ${out##*$'\n'}"
      return 1
    fi
    sleep 2
  done
}

# Prints the KUBECONFIG export and the kubectl path plainly, and keeps them for the view.
show_usage() {
  usage="  export KUBECONFIG=$KUBECONFIG"$'\n'"  kubectl: $KUBECTL"$'\n'"  logs: $1"$'\n'
  say "" "To use the cluster from another shell:" "export KUBECONFIG=$KUBECONFIG" "$KUBECTL get novas,novacomputes -A" "(kubectl: $KUBECTL; logs: $1)" ""
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
  "$KUBECTL" -n openstack get httproutes -o json --request-timeout=10s 2>/dev/null | python3 -c '
import json, sys
try:
    routes = json.load(sys.stdin)["items"]
except ValueError:  # kubectl failed (the API server restarting): the next pass retries
    routes = []
for route in routes:
    if (route.get("status") or {}).get("parents"):
        continue
    print(route["metadata"]["name"], route["metadata"].get("generation", 1), json.dumps(route["spec"]["parentRefs"][0]))
' | while read -r name generation parent; do
    log "SIMULATED gateway controller: accepting HTTPRoute openstack/$name"
    "$KUBECTL" -n openstack patch httproute "$name" --subresource=status --type=merge --request-timeout=10s -p '{"status":{"parents":[{"parentRef":'"$parent"',"controllerName":"nova.c5c3.io/simulated-gateway","conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"simulated gateway controller: accepted, nothing routes traffic","lastTransitionTime":"'"$(date -u +%Y-%m-%dT%H:%M:%SZ)"'","observedGeneration":'"$generation"'}]}]}}' >/dev/null || true
  done
}

# The light mode runs no MariaDB: a SIMULATED mariadb-operator writes the status only, Ready for
# the MariaDB cluster and every Database, User and Grant in namespace openstack that is not
# Ready yet (no schema, user or grant exists anywhere). The OpenStack mode's simulated operators
# (tests/src/simulated.rs) create them for real.
simulated_mariadb_statuses() {
  "$KUBECTL" -n openstack get mariadbs.k8s.mariadb.com,databases.k8s.mariadb.com,users.k8s.mariadb.com,grants.k8s.mariadb.com \
    -o json --request-timeout=10s 2>/dev/null | python3 -c '
import json, sys
try:
    objects = json.load(sys.stdin)["items"]
except ValueError:  # kubectl failed: the next pass retries
    objects = []
for o in objects:
    conditions = (o.get("status") or {}).get("conditions") or []
    if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        continue
    print(o["kind"].lower(), o["metadata"]["name"], o["metadata"].get("generation", 1))
' | while read -r kind name generation; do
    log "SIMULATED mariadb-operator (status only, no MariaDB runs): $kind openstack/$name Ready"
    "$KUBECTL" -n openstack patch "$kind.k8s.mariadb.com" "$name" --subresource=status --type=merge --request-timeout=10s -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Simulated","message":"SIMULATED mariadb-operator of scripts/run.sh --no-openstack: status only, no MariaDB runs","lastTransitionTime":"'"$(date -u +%Y-%m-%dT%H:%M:%SZ)"'","observedGeneration":'"$generation"'}]}}' >/dev/null || true
  done
}

# The simulated operators' loop, in the background until the teardown's SIGTERM, which also
# ends its sleep (every kubectl call in a pass is bounded by its request timeout). Arguments:
# the passes to run.
simulated_operators() {
  local nap="" pass
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  while :; do
    for pass in "$@"; do "$pass" || true; done
    sleep 2 &
    nap=$!
    wait "$nap"
  done
}

# A SIMULATED nova-api for the light mode, where no pod runs: the root version document the
# controller's health probe reads, on 127.0.0.1:$1 (the controller dials it instead of the
# Service). The controller's OpenStack calls are routed here too (Keystone's and nova-api's
# Service names, so nothing resolves a cluster name through the host's DNS): anything but
# that document is a 503 saying no OpenStack runs. Each request is logged to $2.
simulated_nova_api() {
  python3 -u -c '
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/" and not self.headers.get("Host", "").startswith("keystone."):
            self.answer(200, b"{\"versions\": [{\"id\": \"v2.1\", \"status\": \"CURRENT\"}]}")
        else:
            self.unavailable()
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))  # discarded, never logged
        self.unavailable()
    def unavailable(self):
        self.answer(503, b"{\"error\": \"SIMULATED by scripts/run.sh --no-openstack: no OpenStack runs in the light mode\"}")
    def log_message(self, fmt, *args):
        sys.stderr.write("SIMULATED nova-api: " + (fmt % args) + "\n")
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
' "$1" 2>"$2" &
  pids+=($!)
}

# A port free on loopback: $1 if it is, else one the kernel picks (another run, another tool).
port() {
  python3 -c '
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])' "$1"
}

# Waits (bounded) until a local process answers on URL $1; fails naming it and its log $2.
wait_http() {
  local i
  for i in $(seq 100); do
    curl -fs --max-time 2 "$1" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  log "$1 did not answer in 20 s; the end of $2:"
  tail -20 "$2" >&2 2>/dev/null || true
  return 1
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
  say "" "Look next:" "export KUBECONFIG=$KUBECONFIG" "$KUBECTL get novas,novacomputes -A" ""
  log "metrics: $1"
  log "dashboard: charts/nova-operator/dashboards/nova-operator.json (uid nova-operator; installed as a ConfigMap by the chart)"
}

# The binaries the light mode runs, with cargo's own progress (a cold build takes minutes:
# cargo names each crate it compiles) and the time it took. Sets TARGET.
build_binaries() {
  log "building nova-webhook, nova-controller, nova-certs and nova-control-plane (cargo; a cold build takes several minutes, cargo reports each crate)"
  timed cargo build --locked -p nova-webhook -p nova-controller -p nova-certs -p nova-test-harness --bins
  TARGET=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys,json;print(json.load(sys.stdin)["target_directory"])')/debug
}

light() {
  log "building the test control plane's binaries (tests/build-control-plane.sh; a cold build takes about 25 min and logs each binary)"
  NOVA_TESTBIN=$(timed tests/build-control-plane.sh)
  export NOVA_TESTBIN
  KUBECTL="$NOVA_TESTBIN/kubectl"
  build_binaries
  local target=$TARGET
  "$target/nova-controller" conditions >"$RUN/conditions"
  CONTROL_PLANE="$target/nova-control-plane"
  "$CONTROL_PLANE" down >/dev/null 2>&1 || true
  log "starting the control plane (kwok-only; state in $NOVA_DEV_STATE)"
  local exports
  exports=$("$CONTROL_PLANE" up)
  eval "$exports"
  show_usage "$RUN/{webhook,controller,simulated-nova-api}.log"

  local webhook metrics health probe api
  webhook=$(port 9443) metrics=$(port 9080) probe=$(port 8080) health=$(port 8081) api=$(port 8774)
  log "generating the webhook's serving certificate"
  "$target/nova-certs" --out "$RUN/webhook-certs" --san 127.0.0.1 --san localhost >/dev/null
  log "starting nova-webhook on 127.0.0.1:$webhook"
  "$target/nova-webhook" --bind-address "127.0.0.1:$webhook" --metrics-bind-address "127.0.0.1:$metrics" \
    --tls-cert-file "$RUN/webhook-certs/tls.crt" --tls-private-key-file "$RUN/webhook-certs/tls.key" \
    --kubeconfig "$KUBECONFIG" >"$RUN/webhook.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$metrics/readyz" "$RUN/webhook.log"

  log "registering the admission webhooks by URL"
  local ca; ca=$(base64 -w0 <"$RUN/webhook-certs/ca.crt")
  hook() { # name path resource
    printf -- '- name: %s\n  clientConfig: {url: "https://127.0.0.1:%s/%s", caBundle: "%s"}\n' "$1" "$webhook" "$2" "$ca"
    printf '  rules: [{apiGroups: [nova.openstack.c5c3.io], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [%s], scope: Namespaced}]\n' "$3"
    printf '  admissionReviewVersions: [v1]\n  sideEffects: None\n  failurePolicy: Fail\n  timeoutSeconds: 10\n'
    # The chart's match condition (templates/admission.yaml): a finalizer's removal does not
    # depend on the webhook.
    printf '  matchConditions: [{name: create-or-spec-change, expression: "%s"}]\n' \
      "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"
  }
  {
    printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: nova-operator}\nwebhooks:\n'
    hook mnova.kb.io mutate-nova-openstack-c5c3-io-v1alpha1-nova novas
    hook mnovacompute.kb.io mutate-nova-openstack-c5c3-io-v1alpha1-novacompute novacomputes
    printf -- '---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: nova-operator}\nwebhooks:\n'
    hook vnova.kb.io validate-nova-openstack-c5c3-io-v1alpha1-nova novas
    hook vnovacompute.kb.io validate-nova-openstack-c5c3-io-v1alpha1-novacompute novacomputes
  } | "$KUBECTL" apply -f - >/dev/null

  log "SIMULATED nova-api on 127.0.0.1:$api: the root document the controller's health probe reads (no pod runs under kwok)"
  simulated_nova_api "$api" "$RUN/simulated-nova-api.log"
  wait_http "http://127.0.0.1:$api/" "$RUN/simulated-nova-api.log"
  log "starting nova-controller (its API health probe dials the SIMULATED nova-api)"
  "$target/nova-controller" --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --metrics-bind-address "127.0.0.1:$probe" --health-probe-bind-address "127.0.0.1:$health" \
    --health-check-address "127.0.0.1:$api" \
    --service-route "keystone.openstack.svc.cluster.local:5000=127.0.0.1:$api" \
    --service-route "nova.openstack.svc.cluster.local:8774=127.0.0.1:$api" >"$RUN/controller.log" 2>&1 &
  pids+=($!)

  log "applying the sample Nova and its inputs; the other operators are SIMULATED by this script, statuses only"
  "$KUBECTL" create namespace openstack >/dev/null
  "$KUBECTL" apply -f examples/dev/inputs.yaml >/dev/null
  log "SIMULATED external-secrets: ClusterSecretStore openbao-cluster-store Ready"
  "$KUBECTL" patch clustersecretstore openbao-cluster-store --subresource=status --type=merge \
    -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Valid","message":"SIMULATED external-secrets of scripts/run.sh --no-openstack: development store"}]}}' >/dev/null
  log "SIMULATED rabbitmq-cluster-operator: RabbitmqCluster openstack/openstack-rabbitmq names its default user"
  "$KUBECTL" -n openstack patch rabbitmqcluster openstack-rabbitmq --subresource=status --type=merge \
    -p '{"status":{"conditions":[],"defaultUser":{"secretReference":{"name":"openstack-rabbitmq-default-user","namespace":"openstack","keys":{"username":"username","password":"password"}}}}}' >/dev/null
  simulated_operators simulated_mariadb_statuses simulated_gateway &
  pids+=($!)
  apply_admitted examples/nova.yaml
  apply_admitted examples/novacompute.yaml
  local rc=0
  watch_conditions || rc=$?
  log "logs: $RUN/{webhook,controller,simulated-nova-api}.log"
  next_steps "http://127.0.0.1:$probe/metrics (controller), http://127.0.0.1:$metrics/metrics (webhook)"
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
  log "building nova-control-plane (cargo; a cold build takes minutes, cargo reports each crate)"
  timed cargo build --locked -p nova-test-harness --bin nova-control-plane
  local target; target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys,json;print(json.load(sys.stdin)["target_directory"])')/debug
  # What the chart's controller image implements (the same source, built by images/build.sh).
  "${NOVA_IMAGES_DIR:-$HOME/.cache/nova-operator-images}/cargo-target/x86_64-unknown-linux-gnu/release/nova-controller" conditions >"$RUN/conditions"
  log "everything built in $(( $(date +%s) - started ))s"

  log "starting the control plane, the real node and OpenStack $RELEASE (logs: $RUN/serve.log)"
  tests/control-plane.sh down >/dev/null 2>&1 || true
  local serving node_up="" waited
  serving=$(date +%s)
  # Bounded: the node lock's own wait (NOVA_NODE_LOCK_TIMEOUT_SECS) plus 15 minutes to start.
  local limit=$(( ${NOVA_NODE_LOCK_TIMEOUT_SECS:-3600} + 900 ))
  # tee empties serve.log only once it runs: the wait below must not read the last run's.
  : >"$RUN/serve.log"
  # serve's teardown logs on stderr: its tee ignores Ctrl-C and, with -p, a closed output pipe
  # (| tee), so serve's last writes never fail (a failed eprintln! would panic mid-teardown).
  "$target/nova-control-plane" --state-dir "$STATE/serve" serve --openstack "$RELEASE" \
    --service-user-secret openstack/nova-keystone --without-operator-crds >"$RUN/serve.out" 2> >(trap '' INT; exec tee -p "$RUN/serve.log" >&2) &
  pids+=($!)
  until grep -qx ready "$RUN/serve.out" 2>/dev/null; do
    kill -0 "${pids[0]}" 2>/dev/null || { log "the control plane did not start (above)"; exit 1; }
    if [ $(( $(date +%s) - serving )) -ge "$limit" ]; then
      log "the control plane, the node and OpenStack were not up after ${limit}s; the end of $RUN/serve.log:"
      tail -5 "$RUN/serve.log" >&2 2>/dev/null || true
      exit 1
    fi
    if [ -z "$node_up" ] && grep -q 'real node up' "$RUN/serve.log" 2>/dev/null; then
      node_up=$(date +%s)
      waited=$(sed -n 's/.*got the real node lock after \([0-9]*\).*/\1/p' "$RUN/serve.log")
      phase "the control plane and the real node are up in $((node_up - serving))s${waited:+ (${waited}s of it waiting for the node lock)}"
    fi
    sleep 1
  done
  phase "OpenStack $RELEASE is up in $(( $(date +%s) - ${node_up:-$serving} ))s"
  eval "$(grep '^export KUBECONFIG=' "$RUN/serve.out")"
  show_usage "$RUN/serve.log; the controller's: kubectl -n nova-system logs -l app.kubernetes.io/component=controller"
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
  simulated_operators simulated_gateway &
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
