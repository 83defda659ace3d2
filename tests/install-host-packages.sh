#!/usr/bin/env bash
# Installs the pinned Debian packages the real node and the image builds need
# (HOST_PACKAGES in tests/versions.env) when any is missing or at another version.
# Needs root; a machine that has them all returns at once.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/build-lib.sh"
missing=()
for pkg in $HOST_PACKAGES; do
  name=${pkg%%=*} want=${pkg#*=}
  have=$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null || true)
  [ "$have" = "$want" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  log host-packages "warm: every pinned package is installed"
  exit 0
fi
[ "$(id -u)" = 0 ] || { log host-packages "root is needed to install: ${missing[*]}"; exit 1; }
t=$(date +%s)
log host-packages "installing ${missing[*]}"
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
log host-packages "installed in $(( $(date +%s) - t ))s"
