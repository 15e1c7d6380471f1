#!/usr/bin/env bash
# Makes the base image of deploy/compose/Dockerfile locally when Docker does not have it yet:
# a minimal Debian 12 (bookworm) root file system built by debootstrap from the Debian mirror,
# imported with `docker import`. For machines that reach Debian's mirror but no container
# registry (`docker pull debian:bookworm-slim` fails there). Where a registry is reachable,
# `docker pull debian:bookworm-slim` does the same job and this script then has nothing to do.
#
#   deploy/compose/make-base-image.sh            # makes debian:bookworm-slim unless present
#   deploy/compose/make-base-image.sh --force    # makes it again (replaces the tag)
#   BASE_IMAGE=my/bookworm:1 DEBIAN_MIRROR=http://mirror.example/debian \
#     deploy/compose/make-base-image.sh
#
# Needs root (debootstrap), debootstrap and a running Docker engine. Idempotent: exits 0 at once
# when the image exists. Takes a few minutes the first time (about 90 packages are downloaded and
# unpacked); the image is about 100 MB.
set -euo pipefail

IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${DEBIAN_SECURITY_MIRROR:-${MIRROR%/debian}/debian-security}
FORCE=0
case "${1:-}" in
  --force) FORCE=1 ;;
  -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
  "") ;;
  *) echo "make-base-image.sh: unknown argument $1" >&2; exit 2 ;;
esac

log() { echo "[make-base-image] $*"; }

docker info > /dev/null 2>&1 || { echo "make-base-image.sh: the Docker engine is not running" >&2; exit 1; }
if [ "$FORCE" = 0 ] && docker image inspect "$IMAGE" > /dev/null 2>&1; then
  log "$IMAGE is present: nothing to do"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "make-base-image.sh: debootstrap needs root (run it with sudo)" >&2; exit 1; }
command -v debootstrap > /dev/null ||
  { echo "make-base-image.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

ROOTFS=$(mktemp -d "${TMPDIR:-/var/tmp}/rc-rootfs.XXXXXX")
cleanup() {
  # debootstrap may leave /proc or /sys mounted inside the target after a failure.
  for m in proc sys dev/pts dev; do umount -l "$ROOTFS/$m" 2> /dev/null || true; done
  rm -rf --one-file-system "$ROOTFS"
}
trap cleanup EXIT

log "debootstrap --variant=minbase $SUITE from $MIRROR into $ROOTFS"
debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR" > "$ROOTFS.log" 2>&1 || {
  tail -30 "$ROOTFS.log" >&2
  rm -f "$ROOTFS.log"
  echo "make-base-image.sh: debootstrap failed" >&2
  exit 1
}
rm -f "$ROOTFS.log"

# What Debian's own slim images do: no documentation, manual pages or translations from later
# package installs, no recommended packages, no package cache kept in the image.
mkdir -p "$ROOTFS/etc/dpkg/dpkg.cfg.d" "$ROOTFS/etc/apt/apt.conf.d"
cat > "$ROOTFS/etc/dpkg/dpkg.cfg.d/slim" << 'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
cat > "$ROOTFS/etc/apt/apt.conf.d/slim" << 'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Acquire::Languages "none";
EOF
# The suite, its updates and its security updates, like the official image.
rm -f "$ROOTFS/etc/apt/sources.list"
cat > "$ROOTFS/etc/apt/sources.list.d/debian.sources" << EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb \
  "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/log/* "$ROOTFS"/usr/share/doc/* \
  "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*
# A container gets its own hostname, hosts and resolver files from Docker.
: > "$ROOTFS/etc/hostname"
: > "$ROOTFS/etc/resolv.conf"

log "importing as $IMAGE"
tar --numeric-owner --xattrs -C "$ROOTFS" -c . |
  docker import --change 'CMD ["bash"]' --message "debootstrap --variant=minbase $SUITE" - "$IMAGE" > /dev/null
log "$IMAGE: $(docker image inspect -f '{{.Id}} {{.Size}}' "$IMAGE" | awk '{printf "%s, %d MB", substr($1, 8, 12), $2 / 1e6}')"
