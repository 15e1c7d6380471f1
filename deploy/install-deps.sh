#!/usr/bin/env bash
# Installs the Debian packages ringcache needs, by purpose: building it, running its daemons and
# tools, and its tests by default; the container tooling of deploy/compose only when asked.
# Idempotent and non-interactive; safe to run on every CI start.
set -euo pipefail

usage() {
  cat << 'EOF'
Usage: deploy/install-deps.sh [--with-compose] [--list] [--help]

Installs (apt-get, sudo when not root) the Debian packages to build ringcache, run its daemons
and tools, and run its tests. Installs nothing that is already there; prints what it installs.

  --with-compose  also the container tooling that deploy/compose and the compose test use:
                  debootstrap (the base image without a registry), and Docker's engine
                  (docker.io) and docker-compose from Debian, unless a Docker engine is
                  installed already (docker-ce, or any dockerd): that one is used as it is,
                  never replaced
  --list          print the packages it would check, one purpose per line, and exit
  --help          this text

deploy/test.sh runs it with --with-compose (its compose test needs Docker); deploy/run.sh
without.
EOF
}

WITH_COMPOSE=0
LIST=0
for a in "$@"; do
  case $a in
    --with-compose) WITH_COMPOSE=1 ;;
    --list) LIST=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-deps: unknown argument '$a' (--help)" >&2; exit 2 ;;
  esac
done

BUILD=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang libclang-rt-14-dev
  # LLVM's linker: links the programs in half the time of GNU ld (RINGCACHE_LINKER)
  lld
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libspdlog-dev libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev libcli11-dev libxxhash-dev zlib1g-dev
  # TLS: GnuTLS for NBD, the block data protocol and HTTPS /metrics (gRPC brings its own)
  libgnutls28-dev
  # etcd's v3 API protos (the cluster mode's client is generated from them)
  golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev
  # ringcache-sim replay --nbd: the NBD client library
  libnbd-dev
  # metrics: prometheus-cpp (registry + pull exposer)
  prometheus-cpp-dev
)
RUN=(
  # cluster mode's membership store
  etcd-server etcd-client
)
TEST=(
  # real clients used by the tests
  qemu-utils libnbd-bin python3-libnbd fio prometheus curl python3 iproute2 procps iptables
)
COMPOSE=(debootstrap)

# A Docker engine already there (docker-ce from Docker's own repository conflicts with
# docker.io) is used as it is.
docker_engine() {
  if command -v dockerd > /dev/null 2>&1; then echo "dockerd at $(command -v dockerd)"; return 0; fi
  local p
  for p in docker-ce docker-ee moby-engine docker.io; do
    if dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed"; then
      echo "package $p"
      return 0
    fi
  done
  return 1
}
if [ $WITH_COMPOSE = 1 ]; then
  if engine=$(docker_engine); then
    echo "install-deps: a Docker engine is installed ($engine): using it"
    if ! command -v docker-compose > /dev/null 2>&1; then COMPOSE+=(docker-compose); fi
  else
    COMPOSE+=(docker.io docker-compose)
  fi
fi

if [ $LIST = 1 ]; then
  echo "build: ${BUILD[*]}"
  echo "run: ${RUN[*]}"
  echo "test: ${TEST[*]}"
  if [ $WITH_COMPOSE = 1 ]; then echo "compose: ${COMPOSE[*]}"; fi
  exit 0
fi

PACKAGES=("${BUILD[@]}" "${RUN[@]}" "${TEST[@]}")
if [ $WITH_COMPOSE = 1 ]; then PACKAGES+=("${COMPOSE[@]}"); fi

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
