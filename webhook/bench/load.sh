#!/usr/bin/env bash
# Load benchmark: nova-webhook's /validate-...-nova with the Example Nova over TLS, and a
# constant-response baseline on the same TLS stack, each at 64 keep-alive connections.
# Prints wrk's requests/s and latency distribution and each server's peak RSS (VmHWM).
#
#   webhook/bench/load.sh [duration, default 15s]
#
# Needs wrk (apt-get install wrk). On a machine with two or more cores the server runs on CPU 0
# and wrk on CPU 1, so the load generator does not steal the server's core.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-15s}"
WORK="$(mktemp -d)"
trap 'kill ${WEBHOOK_PID:-} ${BASE_PID:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT

cargo build --release -q -p nova-webhook --bin nova-webhook --example baseline
cargo run --release -q -p nova-certs -- --out "$WORK/certs" >/dev/null

# The body is the fuzz seed: an AdmissionReview CREATE of the Example Nova.
cp webhook/fuzz/seeds/admission/novas-create.json "$WORK/body.json"

taskset -c 0 target/release/nova-webhook --bind-address 127.0.0.1:19443 --metrics-bind-address 127.0.0.1:18080 \
  --tls-cert-file "$WORK/certs/tls.crt" --tls-private-key-file "$WORK/certs/tls.key" \
  --kubeconfig /nonexistent 2>"$WORK/webhook.log" &
WEBHOOK_PID=$!
taskset -c 0 target/release/examples/baseline 127.0.0.1:19444 "$WORK/certs/tls.crt" "$WORK/certs/tls.key" &
BASE_PID=$!
sleep 1
PATH_NOVA=/validate-nova-openstack-c5c3-io-v1alpha1-nova
curl -sk --data-binary @"$WORK/body.json" -H 'Content-Type: application/json' "https://127.0.0.1:19443$PATH_NOVA" | grep -q '"allowed":true'

for target in "nova-webhook 19443 $WEBHOOK_PID" "baseline 19444 $BASE_PID"; do
  set -- $target
  echo "== $1"
  BODY_FILE="$WORK/body.json" taskset -c 1 wrk -t1 -c64 -d"$DURATION" --latency -s webhook/bench/post.lua "https://127.0.0.1:$2$PATH_NOVA" \
    | grep -E 'Requests/sec|Latency|50%|75%|90%|99%|requests in|Non-2xx|errors'
  echo "peak RSS: $(grep VmHWM /proc/$3/status | awk '{print $2, $3}')"
done
