#!/bin/sh
# Makes the compose cluster's throwaway CA and certificates (docker-compose.tls.yml runs it once,
# in the `tls-init` service, before anything else starts). The CA lives in its own volume
# (/tls-ca, mounted in this service only); every holder gets a directory under /tls (a host
# directory: RINGCACHE_TLS_DIR, default deploy/compose/tls) with ca-cert.pem, cert.pem, key.pem,
# and for daemons web.yml (their HTTPS /metrics configuration). Holders that have a directory
# already keep it, so a restart of the project reuses the certificates.
#
# Every server certificate names the holder's compose service (the DNS name its peers and
# Prometheus use) and 127.0.0.1 (the health checks, and the host for the gateway's published
# ports). Roles and names: docs/security.md.
set -eu
CA=/tls-ca
OUT=/tls
if [ ! -f "$CA/ca-cert.pem" ]; then
  ringcachectl tls init-ca --dir "$CA" --cluster "${RINGCACHE_CLUSTER:-ringcache-compose}"
fi
issue() {  # role name
  if [ -f "$OUT/$2/cert.pem" ]; then return 0; fi
  ringcachectl tls issue --ca "$CA" --role "$1" --name "$2" --dns "$2" --ip 127.0.0.1 \
    --out "$OUT/$2" > /dev/null
  echo "tls-init: issued $1 certificate $OUT/$2"
}
web_config() {  # name: /metrics over HTTPS, client certificates of the cluster's CA required
  cat > "$OUT/$1/web.yml" << WEB
tls_server_config:
  cert_file: /tls/$1/cert.pem
  key_file: /tls/$1/key.pem
  client_ca_file: /tls/$1/ca-cert.pem
  client_auth_type: RequireAndVerifyClientCert
WEB
}
for i in 1 2 3; do
  issue datanode "datanode$i" && web_config "datanode$i"
  issue cachenode "cachenode$i" && web_config "cachenode$i"
done
for i in 1 2; do
  issue gateway "gateway$i" && web_config "gateway$i"
done
issue etcd etcd
issue admin admin            # ringcachectl (host and containers), etcdctl
issue admin prometheus       # Prometheus's client certificate for the scrapes
issue client client          # NBD clients: client-cert.pem / client-key.pem for QEMU and libnbd
echo "tls-init: certificates in $OUT (NBD clients: $OUT/client, ringcachectl: $OUT/admin)"
