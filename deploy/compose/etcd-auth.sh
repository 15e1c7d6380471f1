#!/bin/sh
# Turns on etcd's authentication for the compose cluster under TLS (docker-compose.tls.yml runs it
# once, in the `etcd-auth` service, after etcd is healthy and before any daemon starts). etcd
# knows each caller by the CN of its certificate: the admin certificate becomes its root user,
# every daemon the user of its component's role, and an NBD client's certificate nothing at all
# (docs/security.md, "etcd"). Idempotent: a restart of the project runs it again harmlessly.
set -eu
ctl() { ringcachectl --etcd etcd:2379 --tls-dir /tls/admin --timeout 10 "$@"; }
ctl etcd enable-auth
ctl etcd add-user --role datanode datanode1 datanode2 datanode3
ctl etcd add-user --role cachenode cachenode1 cachenode2 cachenode3
ctl etcd add-user --role gateway gateway1 gateway2
ctl etcd add-user --role admin prometheus
echo "etcd-auth: users and roles set; authentication on"
