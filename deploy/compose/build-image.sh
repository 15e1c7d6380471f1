#!/usr/bin/env bash
# Builds the image of the compose cluster (deploy/compose/Dockerfile) from a local build:
# stages ringcache-datanode, ringcache-cachenode, ringcache-gateway and ringcachectl of BUILD_DIR
# (debug sections stripped) in a small build context, works out the Debian packages of their
# shared libraries on this host (ldd + dpkg -S), makes the base image first when Docker does not
# have it (make-base-image.sh), and runs docker build.
#
#   deploy/compose/build-image.sh [BUILD_DIR]     # default ./build; tags ringcache:local
#   RINGCACHE_IMAGE=ringcache:test BASE_IMAGE=debian:bookworm-slim deploy/compose/build-image.sh
#
# Build the binaries first (cmake --build build --target daemons, as deploy/run.sh does). The
# host must run the Debian release of the base image (bookworm): the binaries are linked against
# its libraries. --print-packages BUILD_DIR prints those packages and builds nothing.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PRINT_PACKAGES=0
if [ "${1:-}" = --print-packages ]; then PRINT_PACKAGES=1; shift; fi
BUILD=${1:-$ROOT/build}
IMAGE=${RINGCACHE_IMAGE:-ringcache:local}
BASE=${BASE_IMAGE:-debian:bookworm-slim}
BINARIES=(datanode/ringcache-datanode cachenode/ringcache-cachenode gateway/ringcache-gateway
          tools/ctl/ringcachectl)

log() { echo "[build-image] $*"; }
case "$BUILD" in -h|--help) sed -n '2,13p' "$0"; exit 0 ;; esac
[ -d "$BUILD" ] || { echo "build-image.sh: no build directory $BUILD" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd)
for b in "${BINARIES[@]}"; do
  [ -x "$BUILD/$b" ] || { echo "build-image.sh: $BUILD/$b is missing: build it first" >&2; exit 2; }
done
# The packages that own the binaries' shared libraries here (what the image must install). One
# dpkg -S for all of them: each dpkg-query reads the whole package database (a quarter of a
# CPU-second), and one per library and spelling took 20 CPU-seconds per image.
packages=""
if command -v dpkg > /dev/null; then
  libs=$(for b in "${BINARIES[@]}"; do ldd "$BUILD/$b"; done |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)
  # shellcheck disable=SC2086  # one word per path
  reals=$(readlink -f $libs)
  # usr-merged Debian: a library is owned under /lib or /usr/lib, whichever dpkg recorded.
  # shellcheck disable=SC2046
  owners=$(dpkg -S $(awk '{ p = $0; sub("^/usr", "", p); print $0, p, "/usr" $0 }' <<< "$reals") \
    2> /dev/null || true)
  # owners: "pkg[:arch][, pkg...]: /path" lines; each library's first owner of any spelling
  packages=$(awk -v owners="$owners" '
    BEGIN {
      n = split(owners, line, "\n")
      for (i = 1; i <= n; i++) {
        j = index(line[i], ": /")
        if (j) owner[substr(line[i], j + 2)] = substr(line[i], 1, j - 1)
      }
    }
    { p = $0; sub("^/usr", "", p)
      o = ($0 in owner) ? owner[$0] : (p in owner) ? owner[p] : ""
      if (o == "" && ("/usr" $0) in owner) o = owner["/usr" $0]
      if (o == "") print "?:" $0 > "/dev/stderr"; else print o }' <<< "$reals" |
    sed 's/,.*//' | cut -d: -f1 | sort -u | tr '\n' ' ')
fi
if [ $PRINT_PACKAGES = 1 ]; then
  echo "$packages"
  exit 0
fi

docker info > /dev/null 2>&1 || { echo "build-image.sh: the Docker engine is not running" >&2; exit 1; }

if ! docker image inspect "$BASE" > /dev/null 2>&1; then
  log "base image $BASE is missing: making it"
  BASE_IMAGE=$BASE bash "$HERE/make-base-image.sh"
fi

CTX=$(mktemp -d "${TMPDIR:-/tmp}/rc-image.XXXXXX")
trap 'rm -rf "$CTX"' EXIT
mkdir -p "$CTX/bin"
for b in "${BINARIES[@]}"; do
  out=$CTX/bin/$(basename "$b")
  if command -v strip > /dev/null; then
    strip --strip-debug -o "$out" "$BUILD/$b"
  else
    cp "$BUILD/$b" "$out"
  fi
done
cp "$HERE/Dockerfile" "$CTX/Dockerfile"

args=(--build-arg "BASE_IMAGE=$BASE")
if [ -n "$packages" ]; then
  args+=(--build-arg "RUNTIME_PACKAGES=${packages% }")
  log "runtime packages: $packages"
fi

log "building $IMAGE from $BUILD on $BASE"
old=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2> /dev/null || true)
# The classic builder: docker.io 20.10 has no buildx, and it needs no registry for the frontend.
DOCKER_BUILDKIT=0 docker build --force-rm "${args[@]}" -t "$IMAGE" "$CTX" > "$CTX/build.log" 2>&1 || {
  tail -40 "$CTX/build.log" >&2
  echo "build-image.sh: docker build failed" >&2
  exit 1
}
new=$(docker image inspect -f '{{.Id}}' "$IMAGE")
# The image the tag named before, once no other tag names it and no container uses it: no
# dangling copies pile up.
if [ -n "$old" ] && [ "$old" != "$new" ] &&
    [ "$(docker image inspect -f '{{len .RepoTags}}' "$old" 2> /dev/null)" = 0 ]; then
  docker rmi "$old" > /dev/null 2>&1 || true
fi
log "$IMAGE: $(docker image inspect -f '{{.Id}} {{.Size}}' "$IMAGE" | awk '{printf "%s, %d MB", substr($1, 8, 12), $2 / 1e6}')"
