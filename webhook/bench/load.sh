#!/usr/bin/env bash
# Load benchmark: nova-webhook's validate and mutate paths for the Example Nova over TLS, beside
# a constant-response baseline on the same TLS stack, each at 64 keep-alive connections.
# Prints, per server and path: wrk's requests/s and latency percentiles, the server's CPU time
# per review (utime+stime from /proc over the run, divided by the requests served), how long
# the server was runnable but not running (its threads' run-queue wait from
# /proc/PID/task/*/schedstat, and how often it was preempted: the time another process took
# its core, which lands on the latency tail), and the server's peak RSS (VmHWM).
#
#   webhook/bench/load.sh [duration, default 15s] [another nova-webhook binary to compare]
#
# LOAD_NICE=-20 runs the servers and wrk at that niceness (default 0), so that the other
# processes of a shared machine take their cores less often.
#
# Idle CPUs poll for the run (LOAD_IDLE_POLL=0 turns it off): the script holds a PM QoS
# request of 0 us on /dev/cpu_dma_latency, as tuned's latency-performance profile does, and
# the kernel drops it when the script exits. On a VM whose idle CPUs halt (this project's
# Firecracker machines: cpuidle haltpoll with guest_halt_poll_ns=0), waking a halted vCPU
# took 2.1 ms (perf sched timehist: wrk woken on an idle CPU ran 2.114 ms later), which put
# the whole closed loop's in-flight requests on the latency tail: the baseline's p99 was
# 1.8-3.3 ms at a 0.6 ms mean without it, 1.1-1.9 ms with it.
#
# The optional second argument runs an older build (say, main's before a change) through the
# same paths in the same run, so the figures share one machine state.
#
# Needs wrk (apt-get install wrk). On a machine with two or more cores each server runs on
# CPU 0 and wrk on CPU 1, so the load generator does not steal the server's core.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-15s}"
BEFORE="${2:-}"
NICE="${LOAD_NICE:-0}"
WORK="$(mktemp -d)"
if [ "${LOAD_IDLE_POLL:-1}" = 1 ]; then
  if [ -w /dev/cpu_dma_latency ] && exec 3>/dev/cpu_dma_latency; then
    printf '\0\0\0\0' >&3
    echo "idle CPUs poll for the run (PM QoS 0 us on /dev/cpu_dma_latency)"
  else
    echo "idle CPUs may halt: /dev/cpu_dma_latency is not writable here"
  fi
fi
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

cargo build --release -q -p nova-webhook --bin nova-webhook --example baseline
TARGET="${CARGO_TARGET_DIR:-target}"
cargo run --release -q -p nova-certs -- --out "$WORK/certs" >/dev/null

# The body is the fuzz seed: an AdmissionReview CREATE of the Example Nova as written.
cp webhook/fuzz/seeds/admission/novas-create.json "$WORK/body.json"
VALIDATE=/validate-nova-openstack-c5c3-io-v1alpha1-nova
MUTATE=/mutate-nova-openstack-c5c3-io-v1alpha1-nova
TICKS="$(getconf CLK_TCK)"

# start <binary> <port> <admin port>: a nova-webhook pinned to CPU 0; its pid in STARTED.
start() {
  nice -n "$NICE" taskset -c 0 "$1" --bind-address "127.0.0.1:$2" --metrics-bind-address "127.0.0.1:$3" \
    --tls-cert-file "$WORK/certs/tls.crt" --tls-private-key-file "$WORK/certs/tls.key" \
    --kubeconfig /nonexistent >/dev/null 2>>"$WORK/webhook.log" &
  STARTED=$!
  PIDS+=("$STARTED")
}

# A port free on loopback now, chosen by the kernel.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# The run-queue wait (ns) and the involuntary context switches of all of a process's threads.
waited() { cat /proc/"$1"/task/*/schedstat | awk '{s += $2} END {printf "%d", s}'; }
preempted() {
  cat /proc/"$1"/task/*/status | awk '/^nonvoluntary_ctxt_switches/ {s += $2} END {printf "%d", s}'
}

# run <label> <port> <pid> <path>: one wrk run and its figures.
run() {
  local before after out requests wait0 wait1 pre0 pre1
  before="$(cpu_ticks "$3")"
  wait0="$(waited "$3")"
  pre0="$(preempted "$3")"
  out="$(BODY_FILE="$WORK/body.json" nice -n "$NICE" taskset -c 1 wrk -t1 -c64 -d"$DURATION" --latency \
    -s webhook/bench/post.lua "https://127.0.0.1:$2$4")"
  after="$(cpu_ticks "$3")"
  wait1="$(waited "$3")"
  pre1="$(preempted "$3")"
  requests="$(echo "$out" | awk '/requests in/ {print $1}')"
  echo "== $1 $4"
  echo "$out" | grep -E 'Requests/sec|Latency  |50%|90%|99%|Non-2xx|errors' || true
  awk -v t="$((after - before))" -v hz="$TICKS" -v n="$requests" \
    'BEGIN { printf "server CPU per review: %.1f us\n", t / hz / n * 1e6 }'
  echo "runnable, not running: $(((wait1 - wait0) / 1000000)) ms, $((pre1 - pre0)) preemptions"
  echo "peak RSS: $(grep VmHWM "/proc/$3/status" | awk '{print $2, $3}')"
}

BASE_PORT="$(free_port)" AFTER_PORT="$(free_port)" BEFORE_PORT="$(free_port)"
nice -n "$NICE" taskset -c 0 "$TARGET/release/examples/baseline" 127.0.0.1:$BASE_PORT "$WORK/certs/tls.crt" "$WORK/certs/tls.key" &
BASE_PID=$!
PIDS+=("$BASE_PID")
start "$TARGET/release/nova-webhook" "$AFTER_PORT" "$(free_port)"
AFTER_PID=$STARTED
if [ -n "$BEFORE" ]; then
  start "$BEFORE" "$BEFORE_PORT" "$(free_port)"
  BEFORE_PID=$STARTED
fi
sleep 1
for port in "$AFTER_PORT" ${BEFORE:+"$BEFORE_PORT"}; do
  echo "checking the server on port $port"
  curl -sk --data-binary @"$WORK/body.json" -H 'Content-Type: application/json' \
    "https://127.0.0.1:$port$VALIDATE" | grep -q '"allowed":true'
  curl -sk --data-binary @"$WORK/body.json" -H 'Content-Type: application/json' \
    "https://127.0.0.1:$port$MUTATE" | grep -q '"patchType":"JSONPatch"'
done

run baseline "$BASE_PORT" "$BASE_PID" "$VALIDATE"
for path in "$VALIDATE" "$MUTATE"; do
  run nova-webhook "$AFTER_PORT" "$AFTER_PID" "$path"
  if [ -n "$BEFORE" ]; then
    run "before ($BEFORE)" "$BEFORE_PORT" "$BEFORE_PID" "$path"
  fi
done
