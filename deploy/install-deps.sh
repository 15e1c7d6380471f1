#!/usr/bin/env bash
# Installs every Debian package ringcache's build, tests and tools need.
# Idempotent and non-interactive; safe to run on every CI start.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang libclang-rt-14-dev
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libspdlog-dev libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev libcli11-dev libxxhash-dev zlib1g-dev
  # TLS: GnuTLS for NBD, the block data protocol and HTTPS /metrics (gRPC brings its own)
  libgnutls28-dev
  # etcd and its v3 API protos (cluster mode)
  etcd-server etcd-client golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev
  # real clients used by the tests
  qemu-utils libnbd-bin python3-libnbd fio prometheus curl python3 iproute2 procps
  # ringcache-sim replay --nbd: the NBD client library
  libnbd-dev
  # metrics: prometheus-cpp (registry + pull exposer)
  prometheus-cpp-dev
  # the compose cluster (deploy/compose): Docker engine, compose, and the base image's debootstrap
  docker.io docker-compose debootstrap
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
