#!/usr/bin/env bash
# Builds the operator's two images, nova-controller and nova-webhook: each a static release
# binary (glibc, crt-static) on an empty base, run as 65532, written as OCI archives the real
# node imports (operator-manifest.tsv beside tests/build-images.sh's manifest.tsv). The cargo
# build has its own target directory in the image cache (other RUSTFLAGS than the workspace's
# debug builds), so a warm machine only runs cargo's up-to-date check; an image whose binary
# and Containerfile are unchanged is not rebuilt. Prints the image cache directory last.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGES=${NOVA_IMAGES_DIR:-$HOME/.cache/nova-operator-images}
ARCHIVES=$IMAGES/archives
TARGET_DIR=${NOVA_IMAGE_TARGET_DIR:-$IMAGES/cargo-target}
PODMAN=(podman --root "$IMAGES/podman/root" --runroot "$IMAGES/podman/runroot"
        --storage-driver overlay --cgroup-manager cgroupfs --events-backend file)
TAG=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)
log() { printf '[operator images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
command -v podman >/dev/null || { log "podman is required (tests/install-host-packages.sh)"; exit 1; }
mkdir -p "$ARCHIVES"
# One build at a time per cache: a second run would rmi the tag the first is still saving.
exec 9>"$IMAGES/.build-operator-images.lock"
flock -n 9 || { log "waiting for the build holding $IMAGES/.build-operator-images.lock"; flock 9; }

t=$(date +%s)
log "building the static release binaries (cargo, target $TARGET_DIR)"
# --target keeps RUSTFLAGS off build scripts and proc macros, which cannot be static.
(cd "$ROOT" && RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR="$TARGET_DIR" \
  nice -n 10 cargo build --release --locked --jobs "${NOVA_IMAGE_JOBS:-2}" \
    --target x86_64-unknown-linux-gnu -p nova-controller -p nova-webhook \
    --bin nova-controller --bin nova-webhook)
log "binaries ready in $(( $(date +%s) - t ))s"

# The controller's system roots: Mozilla's CA set from the pinned Debian ca-certificates
# package, concatenated as update-ca-certificates would (no shell in the image to run it), so
# an https Keystone with a publicly issued certificate verifies without a mounted bundle.
CA_VERSION=$(sed -n 's/^CA_CERTIFICATES_VERSION=//p' "$ROOT/tests/versions.env")
ROOTS=$IMAGES/ca-certificates-$CA_VERSION.crt
if [ ! -s "$ROOTS" ]; then
  debs=$(mktemp -d)
  (cd "$debs" && apt-get download "ca-certificates=$CA_VERSION" >&2)
  dpkg-deb -x "$debs"/ca-certificates_*.deb "$debs/root"
  cat "$debs"/root/usr/share/ca-certificates/mozilla/*.crt > "$ROOTS.tmp"
  mv "$ROOTS.tmp" "$ROOTS"
  rm -rf "$debs"
  log "system roots: $(grep -c 'BEGIN CERTIFICATE' "$ROOTS") certificates of ca-certificates $CA_VERSION"
fi

manifest=()
for bin in nova-controller nova-webhook; do
  src=$TARGET_DIR/x86_64-unknown-linux-gnu/release/$bin
  ref=localhost/nova-operator/$bin:$TAG
  extra=()
  [ "$bin" = nova-controller ] && extra=("$ROOTS")
  hash=$(cat "$ROOT/images/$bin/Containerfile" "$src" "${extra[@]}" | sha256sum | cut -c1-16)
  archive=$bin-$hash.oci.tar
  manifest+=("$archive	$ref")
  if [ -s "$ARCHIVES/$archive" ]; then
    log "warm: $bin ($hash)"
    continue
  fi
  ctx=$(mktemp -d)
  cp "$ROOT/images/$bin/Containerfile" "$ctx/"
  cp "$src" "$ctx/$bin"
  [ "$bin" = nova-controller ] && cp "$ROOTS" "$ctx/ca-certificates.crt"
  strip "$ctx/$bin"
  "${PODMAN[@]}" build --pull=never --network none -t "$ref" "$ctx" >&2
  rm -f "$ARCHIVES/$archive.tmp"
  "${PODMAN[@]}" save --format oci-archive -o "$ARCHIVES/$archive.tmp" "$ref"
  mv "$ARCHIVES/$archive.tmp" "$ARCHIVES/$archive"
  "${PODMAN[@]}" rmi -f "$ref" >/dev/null
  rm -rf "$ctx"
  log "built $bin ($hash, $(du -h "$ARCHIVES/$archive" | cut -f1))"
done
printf '%s\n' "${manifest[@]}" > "$IMAGES/operator-manifest.tsv.tmp"
mv "$IMAGES/operator-manifest.tsv.tmp" "$IMAGES/operator-manifest.tsv"
echo "$IMAGES"
