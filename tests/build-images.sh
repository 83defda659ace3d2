#!/usr/bin/env bash
# Builds the real node's images with podman (overlay storage under the image cache) and
# writes them as OCI archives the harness imports into containerd: the pause image, a Debian
# base (debootstrap), MariaDB, RabbitMQ and memcached from Debian's packages, and one nova
# image per release holding the pinned nova, Placement and Keystone. Every image is keyed by a
# hash of its recipe (Containerfile, build arguments, context, base), so an unchanged recipe is
# never rebuilt; manifest.tsv lists the current archives and their tags. Needs root, podman,
# debootstrap (HOST_PACKAGES in versions.env), gcc and go (for the pause binary); independent of
# the other build scripts, so scripts/test.sh runs it beside them. Prints the image cache
# directory last.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/build-lib.sh"
IMAGES=${NOVA_IMAGES_DIR:-$HOME/.cache/nova-operator-images}
ARCHIVES=$IMAGES/archives
PODMAN=(podman --root "$IMAGES/podman/root" --runroot "$IMAGES/podman/runroot"
        --storage-driver overlay --cgroup-manager cgroupfs --events-backend file)
mkdir -p "$ARCHIVES"
hold_lock images "$IMAGES/.build-images.lock"
start=$(date +%s)
MANIFEST=()

for tool in podman debootstrap; do
  command -v "$tool" >/dev/null || { log images "$tool is required (Debian package, see HOST_PACKAGES in tests/versions.env)"; exit 1; }
done
command -v gcc >/dev/null || { log images "gcc is required to build the pause binary"; exit 1; }

# build_image NAME CONTEXT_DIR EXTRA_HASH_INPUT REF... [-- PODMAN_BUILD_ARGS...]
# Builds CONTEXT_DIR/Containerfile unless an archive of the same recipe hash exists. The hash
# covers the context's files, EXTRA_HASH_INPUT and the build arguments; the read-only volumes
# in BUILD_VOLUMES (host paths) are not hashed: EXTRA_HASH_INPUT names what they hold.
BUILD_VOLUMES=()
build_image() {
  local name=$1 ctx=$2 extra=$3; shift 3
  local refs=() args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do refs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  args=("$@")
  local hash
  hash=$( { (cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum); printf '%s\n' "$extra" "${args[@]}"; } \
          | sha256sum | cut -c1-16)
  local archive="$name-$hash.oci.tar" tag="localhost/nova-test/build-$name:$hash"
  MANIFEST+=("$archive	$(IFS=,; echo "${refs[*]}")")
  if [ -s "$ARCHIVES/$archive" ]; then
    log images "warm: $name ($hash)"
    return
  fi
  local t; t=$(date +%s)
  log images "building $name ($hash)"
  "${PODMAN[@]}" build --pull=never --network host --layers=false -f "$ctx/Containerfile" \
    -t "$tag" "${args[@]}" "${BUILD_VOLUMES[@]}" "$ctx" >&2
  "${PODMAN[@]}" tag "$tag" "${refs[0]}"
  rm -f "$ARCHIVES/$archive.tmp"
  "${PODMAN[@]}" save --format oci-archive -o "$ARCHIVES/$archive.tmp" "${refs[0]}"
  mv "$ARCHIVES/$archive.tmp" "$ARCHIVES/$archive"
  # The archive is what the node imports; podman's copy would only double the disk use.
  "${PODMAN[@]}" rmi -f "$tag" "${refs[0]}" >/dev/null
  log images "built $name in $(( $(date +%s) - t ))s ($(du -h "$ARCHIVES/$archive" | cut -f1))"
}

# The pause image: a static build of the kubernetes module's build/pause/linux/pause.c.
ctx=$(mktemp -d); cp "$HERE/images/pause/Containerfile" "$ctx/"
K8S_SRC=$(go_module_dir "k8s.io/kubernetes@v$K8S_VERSION")
gcc -Os -static -Wall -DVERSION="v$K8S_VERSION" -o "$ctx/pause" "$K8S_SRC/build/pause/linux/pause.c"
strip "$ctx/pause"
build_image pause "$ctx" "" localhost/nova-test/pause:v$K8S_VERSION
rm -rf "$ctx"

# The Debian base: debootstrap minbase with the same suites as the host's sources.
SOURCES="Types: deb
URIs: $DEBIAN_MIRROR
Suites: $DEBIAN_SUITE $DEBIAN_SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $DEBIAN_SECURITY_MIRROR
Suites: $DEBIAN_SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
BASE_HASH=$(printf '%s\n' "$DEBIAN_SUITE" "$DEBIAN_MIRROR" "$SOURCES" "$(debootstrap --version)" | sha256sum | cut -c1-16)
BASE=localhost/nova-test/debian:$DEBIAN_SUITE-$BASE_HASH
if "${PODMAN[@]}" image exists "$BASE"; then
  log images "warm: debian base ($BASE_HASH)"
else
  t=$(date +%s)
  log images "building the debian base ($BASE_HASH) with debootstrap"
  root=$(mktemp -d)
  debootstrap --variant=minbase "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" >&2
  rm -f "$root/etc/apt/sources.list"
  printf '%s\n' "$SOURCES" > "$root/etc/apt/sources.list.d/debian.sources"
  rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
  tar -C "$root" -c . | "${PODMAN[@]}" import - "$BASE" >&2
  rm -rf "$root"
  log images "built the debian base in $(( $(date +%s) - t ))s"
fi

build_image tools "$HERE/images/tools" "$BASE" localhost/nova-test/tools:1 \
  -- --build-arg "BASE=$BASE" --build-arg "PACKAGES=$TOOLS_PACKAGES"
build_image mariadb "$HERE/images/mariadb" "$BASE" localhost/nova-test/mariadb:10.11 \
  -- --build-arg "BASE=$BASE" --build-arg "PACKAGE=$MARIADB_PACKAGE"
build_image rabbitmq "$HERE/images/rabbitmq" "$BASE" localhost/nova-test/rabbitmq:3.10 \
  -- --build-arg "BASE=$BASE" --build-arg "PACKAGE=$RABBITMQ_PACKAGE"
build_image memcached "$HERE/images/memcached" "$BASE" localhost/nova-test/memcached:1.6 \
  -- --build-arg "BASE=$BASE" --build-arg "PACKAGE=$MEMCACHED_PACKAGE"

# The nova images: a wheelhouse per release (downloaded once by the pinned interpreter), then
# the image with the interpreter and the wheelhouse mounted read-only.
PYTHON=${NOVA_PYTHON_PREFIX:-$HOME/.pyenv/versions/$PYTHON_VERSION}
[ -x "$PYTHON/bin/python3" ] || { log images "Python $PYTHON_VERSION is required at $PYTHON (pyenv install $PYTHON_VERSION, or set NOVA_PYTHON_PREFIX)"; exit 1; }
for release in $OPENSTACK_RELEASES; do
  pins=$HERE/openstack/pins-$release.txt
  wheels=$IMAGES/wheels/$release-$(hash_files "$pins" "$HERE/openstack/image-extras.txt")
  if [ ! -f "$wheels/.complete" ]; then
    t=$(date +%s)
    log images "downloading the $release wheels"
    mkdir -p "$wheels"
    "$PYTHON/bin/python3" -m pip download --quiet --disable-pip-version-check --no-deps \
      --prefer-binary -d "$wheels" -r "$pins" -r "$HERE/openstack/image-extras.txt" >&2
    # A pin published only as a source archive (ovs) becomes a wheel here, built by the same
    # interpreter against the same Debian release the image runs, so the image compiles nothing.
    for sdist in "$wheels"/*.tar.gz; do
      [ -e "$sdist" ] || continue
      log images "building a wheel of $(basename "$sdist")"
      "$PYTHON/bin/python3" -m pip wheel --quiet --disable-pip-version-check --no-deps \
        -w "$wheels" "$sdist" >&2
      rm "$sdist"
    done
    touch "$wheels/.complete"
    log images "downloaded the $release wheels in $(( $(date +%s) - t ))s"
  fi
  ctx=$(mktemp -d)
  cp "$HERE/images/nova/Containerfile" "$ctx/"
  mkdir "$ctx/pins"; cp "$pins" "$ctx/pins/pins.txt"; cp "$HERE/openstack/image-extras.txt" "$ctx/pins/"
  BUILD_VOLUMES=(-v "$PYTHON:/src/python:ro" -v "$wheels:/wheels:ro" -v "$ctx/pins:/src/pins:ro")
  build_image "nova-$release" "$ctx" "$BASE python=$PYTHON_VERSION $(basename "$wheels")" \
    "ghcr.io/c5c3/nova:$release" "ghcr.io/c5c3/nova-compute:$release" \
    -- --build-arg "BASE=$BASE" --build-arg "NOVNC_PACKAGE=$NOVNC_PACKAGE" \
       --build-arg "PYTHON_VERSION=$PYTHON_VERSION"
  BUILD_VOLUMES=()
  rm -rf "$ctx"
done

printf '%s\n' "${MANIFEST[@]}" > "$IMAGES/manifest.tsv.tmp"
mv "$IMAGES/manifest.tsv.tmp" "$IMAGES/manifest.tsv"
log images "images ready in $(( $(date +%s) - start ))s"
echo "$IMAGES"
