# Sourced by the tests that need Docker (compose_test.sh, tests/deploy/package_test.sh):
# ensure_docker uses the engine that runs, or starts dockerd (root only) and remembers to stop
# it; stop_dockerd stops the one it started and puts back iptables' FORWARD policy, which
# dockerd sets to DROP. The caller defines log and skip (skip exits 77) and calls stop_dockerd
# from its EXIT trap. Tests that start dockerd hold ctest's RESOURCE_LOCK host_forwarding, so two
# never race to start one.
STARTED_DOCKERD=""
FORWARD_POLICY=""
DOCKERD_LOG=""
stop_dockerd() {
  [ -n "$STARTED_DOCKERD" ] || return 0
  kill -TERM "$STARTED_DOCKERD" 2> /dev/null || true
  for _ in $(seq 1 150); do
    kill -0 "$STARTED_DOCKERD" 2> /dev/null || break
    sleep 0.2
  done
  kill -0 "$STARTED_DOCKERD" 2> /dev/null && kill -KILL "$STARTED_DOCKERD" 2> /dev/null
  wait "$STARTED_DOCKERD" 2> /dev/null || true
  STARTED_DOCKERD=""
  if [ -n "$FORWARD_POLICY" ] && command -v iptables > /dev/null; then
    iptables -w 5 -P FORWARD "$FORWARD_POLICY" 2> /dev/null || true
  fi
  log "stopped the dockerd this test started (FORWARD policy ${FORWARD_POLICY:-unchanged})"
}
ensure_docker() {
  command -v docker > /dev/null || skip "docker is not installed (deploy/install-deps.sh --with-compose)"
  docker info > /dev/null 2>&1 && return 0
  command -v dockerd > /dev/null || skip "docker info fails and dockerd is not installed"
  [ "$(id -u)" = 0 ] || skip "docker info fails and starting dockerd needs root (uid $(id -u))"
  if command -v iptables > /dev/null; then
    FORWARD_POLICY=$(iptables -w 5 -S FORWARD 2> /dev/null | sed -n 's/^-P FORWARD //p')
  fi
  DOCKERD_LOG=$(mktemp /tmp/rc-dockerd.XXXXXX.log)
  dockerd > "$DOCKERD_LOG" 2>&1 &
  STARTED_DOCKERD=$!
  log "docker info failed: started dockerd (pid $STARTED_DOCKERD, log $DOCKERD_LOG)"
  for _ in $(seq 1 120); do
    docker info > /dev/null 2>&1 && break
    kill -0 "$STARTED_DOCKERD" 2> /dev/null || break
    sleep 0.5
  done
  if ! docker info > /dev/null 2>&1; then
    tail -n 15 "$DOCKERD_LOG" >&2
    stop_dockerd
    skip "the Docker engine cannot start here (dockerd log above: $DOCKERD_LOG)"
  fi
}

# Compose projects that a killed run of a test left behind (ctest's timeout or an ended session
# kill it without its EXIT trap, so no `down -v`). Their containers come back with the engine
# (restart: unless-stopped) and ran whole clusters beside later runs: five stale projects, twenty
# containers, were found running beside a CI run's tests. Each run holds a lock on
# $COMPOSE_LOCKS/PROJECT.lock for its life (hold_project_lock, before the project exists);
# sweep_stale_projects PREFIX removes the containers, volumes and networks of every project named
# PREFIX... whose lock nobody holds (a project named PROJECTtls belongs to PROJECT's run). With
# KEY, the project is that label's value instead of compose's (the package test's container).
COMPOSE_LOCKS=/tmp/ringcache-compose-locks
LOCKED_PROJECT=""
hold_project_lock() {  # PROJECT
  mkdir -p "$COMPOSE_LOCKS"
  exec {PROJECT_LOCK_FD}> "$COMPOSE_LOCKS/$1.lock"
  flock -n "$PROJECT_LOCK_FD" && LOCKED_PROJECT=$1
}
release_project_lock() {  # from the EXIT trap, after down -v
  [ -n "$LOCKED_PROJECT" ] || return 0
  rm -f "$COMPOSE_LOCKS/$LOCKED_PROJECT.lock"
  exec {PROJECT_LOCK_FD}>&-
  LOCKED_PROJECT=""
}
sweep_stale_projects() {  # PREFIX [KEY]
  local key=${2:-com.docker.compose.project} p lock swept=""
  for p in $( { docker ps -a --filter "label=$key" --format "{{.Label \"$key\"}}"
                docker volume ls --filter "label=$key" --format "{{.Label \"$key\"}}"
                docker network ls --filter "label=$key" --format "{{.Label \"$key\"}}"
              } 2> /dev/null | grep "^$1" | sort -u); do
    lock=$COMPOSE_LOCKS/${p%tls}.lock
    if [ -e "$lock" ] && ! flock -n "$lock" true; then continue; fi  # its run is alive
    docker ps -aq --filter "label=$key=$p" | xargs -r docker rm -f -v > /dev/null 2>&1
    docker volume ls -q --filter "label=$key=$p" | xargs -r docker volume rm -f > /dev/null 2>&1
    docker network ls -q --filter "label=$key=$p" | xargs -r docker network rm > /dev/null 2>&1
    rm -f "$lock"
    swept="$swept $p"
  done
  [ -z "$swept" ] || log "removed what killed runs left behind (label $key):$swept"
}
