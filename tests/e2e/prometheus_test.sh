#!/usr/bin/env bash
# The monitoring files against a live cluster. First the static checks: `promtool check config`
# on deploy/prometheus/prometheus.yml, `promtool check rules` on the rule files, `promtool test
# rules` on deploy/prometheus/tests/*.yml, and that deploy/grafana/dashboards/*.json are what
# deploy/grafana/generate.py writes. Then a cluster from deploy/cluster.sh (3 cache nodes, 3
# data nodes, a gateway, VDIs `disk` and `second`), a real Prometheus scraping it every second
# with the rule files loaded, and mixed NBD load (fio, or qemu-io without fio): writes, an idle
# pause so the cache nodes destage, then mostly reads so they hit. Last, every recording rule's
# expression, every recorded series and every `expr` of every dashboard panel goes to
# Prometheus's /api/v1/query, with the dashboard variables ($vdi, $job, $instance) set to the
# values their own label_values() queries find (a query passes if some value gives data) and
# $__rate_interval = 1m. Fails listing each query that returns no data, with the metric names
# or labels it found missing; every rule must also evaluate without error.
#
#   tests/e2e/prometheus_test.sh BUILD_DIR
#
# Env: KEEP=1 keeps the work directory (cluster logs, Prometheus data, results.txt). Exits 77
# (skipped) when prometheus or promtool is not installed.
set -euo pipefail

BUILD=$(cd "${1:?usage: prometheus_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PROMDIR=$ROOT/deploy/prometheus
DASHDIR=$ROOT/deploy/grafana/dashboards

log() { echo "[prometheus] $(date +%T) $*"; }
for tool in prometheus promtool; do
  if ! command -v "$tool" > /dev/null; then
    log "SKIP: $tool not installed (Debian package prometheus)"
    exit 77
  fi
done

WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-prom.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own
PROM_PORT=$((BASE + 1))  # free: pick_base_port checked P+1, cluster.sh does not use it
PROM_URL=http://127.0.0.1:$PROM_PORT
PROM_PID=""

fail() {
  echo "[prometheus] FAIL: $*" >&2
  exit 1
}
cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
cleanup() {
  set +e
  if [ -n "$PROM_PID" ]; then
    kill "$PROM_PID" 2> /dev/null
    for _ in $(seq 1 100); do kill -0 "$PROM_PID" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$PROM_PID" 2> /dev/null
    wait "$PROM_PID" 2> /dev/null
  fi
  cluster down > /dev/null 2>&1
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# ---- static checks ----------------------------------------------------------------------------
promtool check config "$PROMDIR/prometheus.yml" > "$WORK/check-config.txt" 2>&1 ||
  { cat "$WORK/check-config.txt"; fail "promtool check config"; }
promtool check rules "$PROMDIR/recording_rules.yml" "$PROMDIR/alert_rules.yml" \
  > "$WORK/check-rules.txt" 2>&1 || { cat "$WORK/check-rules.txt"; fail "promtool check rules"; }
(cd "$PROMDIR" && promtool test rules tests/*.yml) > "$WORK/test-rules.txt" 2>&1 ||
  { cat "$WORK/test-rules.txt"; fail "promtool test rules"; }
python3 "$ROOT/deploy/grafana/generate.py" --check || fail "dashboards out of date"
log "promtool check config, check rules, test rules pass; dashboards up to date"

# ---- cluster, Prometheus ----------------------------------------------------------------------
cluster up --base-port "$BASE" --cache-nodes 3 --data-nodes 3 --ssd-size 64MiB --ram-size 8MiB \
  --create-vdi disk:128MiB --create-vdi second:32MiB > "$WORK/up.log" 2>&1 ||
  { cat "$WORK/up.log"; tail -n 20 "$WORK"/cluster/logs/*.log; fail "cluster up"; }
log "cluster up on base port $BASE"

targets() {  # OFFSET...: quoted host:port list
  local out="" o
  for o in "$@"; do out+="${out:+, }\"127.0.0.1:$((BASE + o))\""; done
  echo "$out"
}
cat > "$WORK/prometheus.yml" << EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $PROMDIR/recording_rules.yml
  - $PROMDIR/alert_rules.yml
scrape_configs:
  - job_name: ringcache-gateway
    static_configs:
      - targets: [$(targets 11)]
  - job_name: ringcache-cachenode
    static_configs:
      - targets: [$(targets 401 402 403)]
  - job_name: ringcache-datanode
    static_configs:
      - targets: [$(targets 201 202 203)]
EOF
promtool check config "$WORK/prometheus.yml" > /dev/null || fail "generated config"
prometheus --config.file "$WORK/prometheus.yml" --storage.tsdb.path "$WORK/tsdb" \
  --storage.tsdb.retention.time 1h --web.listen-address "127.0.0.1:$PROM_PORT" \
  --log.level warn > "$WORK/prometheus.log" 2>&1 &
PROM_PID=$!

up_targets() {
  curl -sf "$PROM_URL/api/v1/targets?state=active" 2> /dev/null | python3 -c '
import json, sys
t = json.load(sys.stdin)["data"]["activeTargets"]
print(sum(1 for x in t if x["health"] == "up"))' 2> /dev/null || echo 0
}
start=$SECONDS
while [ "$(up_targets)" != 7 ]; do
  kill -0 "$PROM_PID" 2> /dev/null || { cat "$WORK/prometheus.log"; fail "prometheus exited"; }
  [ $((SECONDS - start)) -lt 60 ] ||
    { curl -s "$PROM_URL/api/v1/targets"; fail "not all 7 targets up after 60 s"; }
  sleep 1
done
log "prometheus on port $PROM_PORT scrapes all 7 targets"

# ---- load -------------------------------------------------------------------------------------
NBD=nbd://127.0.0.1:$((BASE + 9))
load() {  # SECONDS READ_PERCENT: both VDIs, modest rates (the machine is shared)
  if command -v fio > /dev/null; then
    fio --ioengine=nbd --bs=4k --iodepth=4 --rw=randrw --rwmixread="$2" --time_based \
      --runtime="$1" --group_reporting --output="$WORK/fio-$2.txt" \
      --name=disk --uri="$NBD/disk" --size=24M --rate_iops=150,100 \
      --name=second --uri="$NBD/second" --size=4M --rate_iops=20,20 ||
      { cat "$WORK/fio-$2.txt"; fail "fio"; }
  else
    local end=$((SECONDS + $1)) i=0
    while [ $SECONDS -lt $end ]; do
      for vdi in disk second; do
        local off=$(( (i * 64) % (4 * 1024) ))k
        if [ $((RANDOM % 100)) -lt "$2" ]; then
          qemu-io -f raw -c "read $off 64k" "$NBD/$vdi" > /dev/null || fail "qemu-io read"
        else
          qemu-io -f raw -c "write -P $((i % 250 + 1)) $off 64k" "$NBD/$vdi" > /dev/null ||
            fail "qemu-io write"
        fi
      done
      i=$((i + 1))
    done
  fi
}
log "load: 25 s of 40% reads, 8 s idle (destage), 20 s of 90% reads"
load 25 40
sleep 8
load 20 90

# ---- queries ----------------------------------------------------------------------------------
log "querying every recording rule and dashboard expression"
status=0
python3 - "$PROM_URL" "$DASHDIR" > "$WORK/results.txt" 2>&1 << 'PY' || status=$?
import glob, itertools, json, os, re, sys, urllib.parse, urllib.request

url, dashdir = sys.argv[1], sys.argv[2]

def api(path, **params):
    q = urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(f"{url}/api/v1/{path}?{q}", timeout=30) as r:
        return json.load(r)["data"]

def query(expr):
    """(has data, error text, all values NaN)"""
    try:
        d = api("query", query=expr)
    except urllib.error.HTTPError as e:
        return False, json.load(e).get("error", str(e)), False
    res = d["result"]
    if d["resultType"] == "scalar":
        return True, None, res[1] == "NaN"
    if d["resultType"] == "string":
        return True, None, False
    values = [s["value"][1] for s in res]
    return bool(res), None, bool(values) and all(v == "NaN" for v in values)

names = set(api("label/__name__/values"))
rules = [r for g in api("rules")["groups"] for r in g["rules"]]
records = {r["name"]: r["query"] for r in rules if r["type"] == "recording"}

def metric_names(expr):
    """Metric and recording-rule names in expr (quoted strings and label matchers removed)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    out = set()
    for tok in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if tok.startswith(("ringcache_", "process_")) or ":" in tok or tok in ("up", "ALERTS"):
            out.add(tok)
    return out

def absent_sources(expr, seen=None):
    """Raw metric names expr needs that have no series (through recording rules)."""
    seen = seen if seen is not None else set()
    out = set()
    for n in metric_names(expr) - seen:
        seen.add(n)
        if n in records:
            out |= absent_sources(records[n], seen)
        elif n not in names and n != "ALERTS":
            out.add(n)
    return out

def missing_labels(expr):
    """name{...} selectors whose metric exists but lacks a label the selector names (for a
    recording rule, also the metrics of its expression that lack it)."""
    hints = []
    for name, body in re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}", expr):
        if name not in names:
            continue
        have = set(api("labels", **{"match[]": name}))
        for label in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", body):
            if label in have:
                continue
            hints.append((name, label))
            for source in sorted(metric_names(records.get(name, ""))):
                if source in names and label not in set(api("labels", **{"match[]": source})):
                    hints.append((source, label))
    return sorted(set(hints))

BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m", "__range_s": "300",
            "__interval_ms": "15000"}

def substitute(expr, values):
    def repl(m):
        n = m.group(1) or m.group(2)
        return values.get(n, BUILTINS.get(n, m.group(0)))
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", repl, expr)

def label_values(q, values):
    q = substitute(q, values)
    m = re.fullmatch(r"\s*label_values\(\s*(?:(.*),\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", q)
    if not m:
        raise SystemExit(f"cannot evaluate variable query {q!r}")
    sel, label = m.group(1), m.group(2)
    if sel:
        series = api("series", **{"match[]": sel})
        return sorted({s[label] for s in series if label in s})
    return sorted(api(f"label/{label}/values"))

def combos(variables, i=0, values=None):
    values = values or {}
    if i == len(variables):
        yield dict(values)
        return
    name, q = variables[i]
    found = label_values(q, values)
    if not found:
        print(f"  variable ${name}: {q} finds no values")
    for v in found:
        yield from combos(variables, i + 1, {**values, name: v})

def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))

checks = []  # (where, expr, [substituted variants])
for r in rules:
    if r["health"] != "ok":
        checks.append((f"rule {r['name']}", r["query"], None, r.get("lastError", r["health"])))
for name, expr in records.items():
    checks.append((f"recording rule {name} (expression)", expr, [expr], None))
    checks.append((f"recording rule {name} (recorded series)", name, [name], None))
for path in sorted(glob.glob(os.path.join(dashdir, "*.json"))):
    d = json.load(open(path))
    variables = []
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            variables.append((v["name"], q))
    assignments = list(combos(variables))
    base = os.path.basename(path)
    for p in walk_panels(d.get("panels", [])):
        for t in p.get("targets", []):
            if "expr" not in t:
                continue
            expr = t["expr"]
            used = set(re.findall(r"\$\{?(\w+)", expr)) & {n for n, _ in variables}
            variants = []
            for a in assignments:
                s = substitute(expr, {k: a[k] for k in used})
                if s not in variants:
                    variants.append(s)
            checks.append((f"{base} panel \"{p['title']}\" {t.get('refId', '')}", expr,
                           variants, None))

failed, nan_only, passed = [], [], 0
for where, expr, variants, error in checks:
    if error is None and not variants:
        error = "a dashboard variable has no values"
    if error is None:
        ok = False
        for v in variants:
            data, err, nan = query(v)
            if err:
                error = f"query error: {err} in {v}"
                break
            if data:
                ok = True
                if nan:
                    nan_only.append(f"{where}: {v}")
                break
        if ok:
            passed += 1
            continue
    if error is None:
        absent = absent_sources(expr)
        why = []
        if absent:
            why.append("no series of " + ", ".join(sorted(absent)))
        unlabelled = missing_labels(substitute(expr, BUILTINS))
        why += [f"{m} has no label {l}" for m, l in unlabelled]
        error = "no data" + (" (" + "; ".join(why) + ")" if why else "")
    failed.append(f"{where}\n    {expr}\n    -> {error}")

print(f"{passed} of {len(checks)} queries returned data")
if nan_only:
    print(f"\n{len(nan_only)} queries returned only NaN (data, but nothing to plot right now):")
    for f in nan_only:
        print("  " + f)
if failed:
    print(f"\n{len(failed)} queries FAILED:")
    for f in failed:
        print("  " + f)
sys.exit(1 if failed else 0)
PY
cat "$WORK/results.txt"
[ "$status" = 0 ] || fail "queries without data (see above)"

firing=$(curl -s "$PROM_URL/api/v1/alerts" | python3 -c '
import json, sys
print(" ".join(sorted({a["labels"]["alertname"] for a in json.load(sys.stdin)["data"]["alerts"]
                       if a["state"] == "firing"})))')
[ -z "$firing" ] || log "note: alerts firing on the healthy test cluster: $firing"
log "PASS"
