# Shared by the tests/build-*.sh scripts (sourced, not run): pinned versions, the cache
# directory, Go settings, logging and stamps. A stamp file records what a cache directory was
# built from, so a warm machine never rebuilds.
# shellcheck shell=bash

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$HERE/versions.env"
MINOR=${K8S_VERSION#1.}; MINOR=${MINOR%%.*}
BIN=${NOVA_TESTBIN:-$HOME/.cache/nova-operator-testbin/v$K8S_VERSION}

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod

# log PART MESSAGE...
log() { local part=$1; shift; printf '[%s build %s] %s\n' "$part" "$(date +%H:%M:%S)" "$*" >&2; }

# hold_lock PART FILE: holds an exclusive lock on FILE until the script exits, so two runs
# building into one cache (the main job beside the test suite, two worktrees) take turns: the
# second waits, then finds the first's work warm instead of removing an image the first is
# still saving.
hold_lock() {
  mkdir -p "$(dirname "$2")"
  exec 9>"$2"
  flock -n 9 || { log "$1" "waiting for the build holding $2"; flock 9; }
}

# hash_files FILE...: a short digest of the files' contents (not their paths, so every
# worktree of the repository computes the same stamp), for stamps.
hash_files() { cat "$@" | sha256sum | cut -c1-16; }

# stamp_is STAMP_FILE WANT: true when the stamp records exactly WANT.
stamp_is() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# The -ldflags upstream sets for Kubernetes binaries (hack/lib/version.sh), so /version and
# the kubelet report the module version.
k8s_ldflags() {
  local ldf="-s -w" kv
  for kv in gitVersion=v$K8S_VERSION gitMajor=1 gitMinor=$MINOR gitTreeState=clean \
            gitCommit=0000000000000000000000000000000000000000 \
            buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ); do
    ldf="$ldf -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  printf '%s' "$ldf"
}

# go_module_dir MODULE@VERSION: where the Go module cache holds that module's files.
go_module_dir() {
  (cd "$(mktemp -d)" && GOFLAGS= go mod download -json "$1" \
     | python3 -c 'import sys,json;print(json.load(sys.stdin)["Dir"])')
}

# timed PART WHAT CMD...: runs CMD, logging how long it took.
timed() {
  local part=$1 what=$2 t; shift 2; t=$(date +%s)
  log "$part" "building $what"
  "$@"
  log "$part" "built $what in $(( $(date +%s) - t ))s"
}
