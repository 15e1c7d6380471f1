#!/usr/bin/env python3
"""Writes the ringcache Grafana dashboards (dashboards/*.json) from the panel lists below.

    python3 deploy/grafana/generate.py          # rewrite the JSON files
    python3 deploy/grafana/generate.py --check  # exit 1 if a JSON file is not what this writes

The JSON files are what Grafana loads; this script only keeps them consistent (ids, grid
layout, datasource references). Edit the lists here and rerun it, or edit the JSON in Grafana
and export it over the file; both work, but rerunning the script overwrites hand edits.
"""
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboards")

# Every panel and query uses the datasource chosen in the dashboard's DS_PROMETHEUS variable.
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
RI = "$__rate_interval"
JOBS = 'job=~"ringcache-.*"'


def q(expr, legend="", instant=False):
    return {"expr": " ".join(expr.split()), "legend": legend, "instant": instant}


def ts(title, queries, unit="short", desc="", w=8, h=8, stack=False, lo=None, hi=None,
       thresholds=None, overrides=()):
    return {"kind": "timeseries", "title": title, "queries": queries, "unit": unit, "desc": desc,
            "w": w, "h": h, "stack": stack, "min": lo, "max": hi, "thresholds": thresholds,
            "overrides": list(overrides)}


def right_axis(legend, unit, lo=None, hi=None):
    """Override: the series named `legend` on a right-hand axis of its own unit."""
    props = [{"id": "unit", "value": unit}, {"id": "custom.axisPlacement", "value": "right"}]
    if lo is not None:
        props.append({"id": "min", "value": lo})
    if hi is not None:
        props.append({"id": "max", "value": hi})
    return {"matcher": {"id": "byName", "options": legend}, "properties": props}


def stat(title, queries, unit="short", desc="", w=4, h=4, thresholds=None, text_mode="auto"):
    return {"kind": "stat", "title": title, "queries": queries, "unit": unit, "desc": desc,
            "w": w, "h": h, "thresholds": thresholds, "text_mode": text_mode}


def row(title):
    return {"kind": "row", "title": title}


def steps(*pairs):
    """Threshold steps: ("green", None), ("red", 1) ..."""
    return [{"color": c, "value": v} for c, v in pairs]


GOOD_IF_ZERO = steps(("green", None), ("red", 1))


# ---- panel JSON -----------------------------------------------------------------------------

def targets(queries):
    out = []
    for i, t in enumerate(queries):
        out.append({
            "datasource": DS,
            "expr": t["expr"],
            "legendFormat": t["legend"] or "__auto",
            "refId": chr(ord("A") + i),
            "range": not t["instant"],
            "instant": t["instant"],
            "editorMode": "code",
        })
    return out


def panel_json(p, pid, x, y):
    base = {
        "id": pid,
        "type": p["kind"],
        "title": p["title"],
        "gridPos": {"h": p["h"], "w": p["w"], "x": x, "y": y},
        "datasource": DS,
        "targets": targets(p["queries"]),
    }
    if p["desc"]:
        base["description"] = p["desc"]
    thr = p.get("thresholds") or steps(("green", None))
    if p["kind"] == "timeseries":
        custom = {
            "drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
            "spanNulls": False, "axisPlacement": "auto",
            "stacking": {"mode": "normal" if p["stack"] else "none", "group": "A"},
            "thresholdsStyle": {"mode": "line" if p.get("thresholds") else "off"},
        }
        defaults = {"unit": p["unit"], "custom": custom,
                    "thresholds": {"mode": "absolute", "steps": thr}}
        if p["min"] is not None:
            defaults["min"] = p["min"]
        if p["max"] is not None:
            defaults["max"] = p["max"]
        base["fieldConfig"] = {"defaults": defaults, "overrides": p["overrides"]}
        base["options"] = {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    else:
        base["fieldConfig"] = {"defaults": {"unit": p["unit"], "color": {"mode": "thresholds"},
                                            "thresholds": {"mode": "absolute", "steps": thr}},
                               "overrides": []}
        base["options"] = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value", "graphMode": "area", "justifyMode": "auto",
            "orientation": "auto", "textMode": p["text_mode"],
        }
    return base


def layout(items):
    """Places panels left to right in a 24-column grid, wrapping; rows start a new line."""
    panels, pid, x, y, line_h = [], 1, 0, 0, 0
    for p in items:
        if p["kind"] == "row":
            if x:
                y, x, line_h = y + line_h, 0, 0
            panels.append({"id": pid, "type": "row", "title": p["title"], "collapsed": False,
                           "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
            pid, y = pid + 1, y + 1
            continue
        if x + p["w"] > 24:
            y, x, line_h = y + line_h, 0, 0
        panels.append(panel_json(p, pid, x, y))
        pid, x, line_h = pid + 1, x + p["w"], max(line_h, p["h"])
    return panels


def ds_variable():
    return {"name": "DS_PROMETHEUS", "label": "Data source", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "refresh": 1, "regex": "",
            "options": [], "skipUrlSync": False}


def query_variable(name, label, query, multi=False, include_all=False):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": query,  # the string form: Grafana 9.0+ reads it, newer ones migrate it
            "definition": query, "refresh": 2, "sort": 1, "regex": "",
            "multi": multi, "includeAll": include_all, "current": {}, "options": [],
            "hide": 0, "skipUrlSync": False}


def dashboard(uid, title, description, items, variables=()):
    return {
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "9.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
        ],
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts", "type": "dashboard"}]},
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [{"title": "ringcache", "type": "dashboards", "tags": ["ringcache"],
                   "asDropdown": True, "includeVars": False, "keepTime": True}],
        "liveNow": False,
        "panels": layout(items),
        "refresh": "30s",
        "schemaVersion": 37,
        "style": "dark",
        "tags": ["ringcache"],
        "templating": {"list": [ds_variable()] + list(variables)},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": title,
        "uid": uid,
        "version": 1,
        "weekStart": "",
    }


# ---- the dashboards -------------------------------------------------------------------------

def p99(metric, by, sel="", phi="0.99"):
    return (f"histogram_quantile({phi}, sum by ({by}, le) "
            f"(rate({metric}_bucket{{{sel}}}[{RI}])))")


def removals_and_rebalance(sel, agg, w=8):
    """Cache node removals and joins, the data rebalance and its scan progress (right axis).
    agg ("max" or "") folds several gateways into one line each."""
    def m(name):
        e = f"ringcache_gateway_{name}{{{sel}}}" if sel else f"ringcache_gateway_{name}"
        return f"{agg}({e})" if agg else e
    progress = (f"clamp_max({m('rebalance_blocks_scanned')}"
                f" / clamp_min({m('rebalance_blocks_estimated')}, 1), 1)")
    return ts(
        "Removals and rebalance",
        [q(m("cache_node_removals"), "cache node removals"),
         q(m("cache_node_joins"), "cache node joins"),
         q(m("rebalance_active"), "rebalance active"),
         q(progress, "rebalance scanned")],
        w=w, lo=0, overrides=[right_axis("rebalance scanned", "percentunit", 0, 1)],
        desc="Cache nodes being removed (dirty data destaged or replayed from the write-back "
             "log) and joining, 1 while a data rebalance runs, and how far the current (or "
             "last) rebalance has scanned: blocks scanned over the estimate (right axis). "
             "All 0 when idle; a removal takes seconds to minutes.")


OVERVIEW = [
    row("Health"),
    stat("Targets up", [q(f"sum by (job) (up{{{JOBS}}})", "{{job}}")],
         desc="Scraped processes that answered, per job."),
    stat("Targets down", [q(f"sum by (job) (1 - up{{{JOBS}}})", "{{job}}")],
         thresholds=GOOD_IF_ZERO, desc="Scraped processes that did not answer, per job."),
    stat("Firing alerts",
         [q('count(ALERTS{alertstate="firing", alertname=~"Ringcache.*"}) or vector(0)')],
         thresholds=GOOD_IF_ZERO, desc="Ringcache alerts firing now (alert_rules.yml)."),
    stat("Ring epoch", [q("max(ringcache_gateway_ring_epoch)", "gateway"),
                        q("max(ringcache_cachenode_ring_epoch)", "cache nodes"),
                        q("max(ringcache_gateway_data_epoch)", "data ring")],
         desc="The gateway's cache ring epoch, the highest epoch any cache node has seen, and "
              "the epoch of the data ring (bumps with every data node change)."),
    stat("Members", [q("sum by (role, state) (ringcache_gateway_members)", "{{role}} {{state}}")],
         w=4, desc="Cluster members per role and state, as the gateway sees them."),
    stat("Failed devices / checksum failures (1h)",
         [q("sum(ringcache_cachenode_device_failed) + sum(ringcache_datanode_device_failed)",
            "failed devices"),
          q("sum(increase(ringcache_cachenode_ssd_checksum_failures_total[1h]))"
            " + sum(increase(ringcache_datanode_checksum_failures_total[1h]))",
            "checksum failures")],
         thresholds=GOOD_IF_ZERO),
    row("Client I/O (NBD)"),
    ts("IOPS", [q("cluster:ringcache_nbd_requests:rate1m", "total"),
                q(f'sum by (command) (rate(ringcache_nbd_requests_total{{command!="disc"}}[{RI}]))',
                  "{{command}}")],
       unit="iops", desc="NBD requests answered by the gateways per second."),
    ts("Throughput", [q(f"sum by (direction) (rate(ringcache_nbd_bytes_total[{RI}]))",
                        "{{direction}}")], unit="Bps"),
    ts("Latency", [q(p99("ringcache_nbd_request_duration_seconds", "command",
                         'command=~"read|write|flush"'), "p99 {{command}}"),
                   q(p99("ringcache_nbd_request_duration_seconds", "command",
                         'command=~"read|write|flush"', "0.5"), "p50 {{command}}")],
       unit="s"),
    ts("Error answers", [q(f'sum by (command, result) (rate(ringcache_nbd_requests_total'
                           f'{{result!="ok"}}[{RI}])) or vector(0)', "{{command}} {{result}}")],
       unit="reqps", desc="NBD requests answered with an error (0 when there were none)."),
    ts("Connections", [q("sum(ringcache_nbd_connections)", "open"),
                       q(f"sum(rate(ringcache_nbd_connections_rejected_total[{RI}]))",
                         "rejected/s")]),
    ts("Block I/O per VDI (cache nodes)", [q("vdi:ringcache_vdi_block_ops:rate1m", "{{vdi}}")],
       unit="iops", stack=True,
       desc="Block reads and writes (4 KiB blocks) the cache nodes served per VDI."),
    row("Cache"),
    ts("Hit ratio", [q("cluster:ringcache_vdi_hit:ratio_rate1m", "cluster"),
                     q("vdi:ringcache_vdi_hit:ratio_rate1m", "{{vdi}}")],
       unit="percentunit", lo=0, hi=1,
       desc="Block reads served by the cache (RAM or SSD) over reads that looked it up."),
    ts("Reads by tier", [q(f"sum(rate(ringcache_vdi_hits_ram_total[{RI}]))", "RAM hit"),
                         q(f"sum(rate(ringcache_vdi_hits_ssd_total[{RI}]))", "SSD hit"),
                         q(f"sum(rate(ringcache_vdi_misses_total[{RI}]))", "miss")],
       unit="ops", stack=True),
    ts("Dirty bytes", [q("cluster:ringcache_cachenode_dirty_bytes:sum", "cluster"),
                       q("instance:ringcache_cachenode_dirty_bytes:sum", "node {{node}}")],
       unit="bytes"),
    ts("Dirty share of SSD slots", [q("instance:ringcache_cachenode_dirty_slots:ratio",
                                      "node {{node}}")],
       unit="percentunit", lo=0, thresholds=steps(("green", None), ("red", 0.6)),
       desc="Dirty blocks over SSD slots; the destager forces destage above the high "
            "watermark (0.6 by default, the red line)."),
    ts("Destage rate", [q("cluster:ringcache_cachenode_destage_bytes:rate1m", "cluster"),
                        q("instance:ringcache_cachenode_destage_bytes:rate1m", "node {{node}}")],
       unit="Bps"),
    ts("Evictions", [q("instance:ringcache_cachenode_evictions:rate1m", "node {{node}}")],
       unit="ops"),
    ts("Write throttle", [q(f"sum by (node) (rate(ringcache_cachenode_write_throttle_seconds_total"
                            f"[{RI}]))", "node {{node}}")],
       unit="s", desc="Seconds per second that writes waited before the dirty cap: writes slow "
       "down above the high watermark and wait at most 1 s each at the cap (0.9 by default)."),
    ts("VDI I/O limits", [q(f"sum by (vdi) (rate(ringcache_gateway_qos_delay_seconds_total"
                            f"[{RI}]))", "{{vdi}}")],
       unit="s", desc="Seconds per second that a VDI's requests waited for its I/O limits "
       "(ringcachectl vdi set-qos, docs/qos.md), over every gateway."),
    row("Write-back log"),
    ts("Data node log area", [q("instance:ringcache_datanode_log_bytes:sum", "{{instance}}"),
                              q("cluster:ringcache_datanode_log_bytes:sum", "cluster")],
       unit="bytes", desc="Bytes held by the data nodes' write-back log areas."),
    ts("Log pushback", [q("max by (node) (ringcache_cachenode_log_over_limit)", "node {{node}}"),
                        q(f"sum(rate(ringcache_datanode_log_over_limit_total[{RI}]))",
                          "over_limit answers/s")],
       desc="1 while a data node's log area is over its limit for that cache node."),
    ts("Log records", [q("instance:ringcache_cachenode_log_records_appended:rate1m",
                         "appended node {{node}}"),
                       q("instance:ringcache_cachenode_log_records_retired:rate1m",
                         "retired node {{node}}")], unit="ops"),
    row("Gateway to cache nodes"),
    ts("Cache calls", [q("node:ringcache_gateway_cache_calls:rate1m", "node {{node}}")],
       unit="reqps"),
    ts("Cache call errors", [q("node:ringcache_gateway_cache_call_errors:ratio_rate1m",
                               "node {{node}}")], unit="percentunit", lo=0),
    ts("Cache call retries", [q("node:ringcache_gateway_cache_call_retries:rate1m",
                                "node {{node}}")], unit="ops"),
    ts("Cache call latency p99",
       [q("node:ringcache_gateway_cache_call_duration_seconds:p99_rate1m", "node {{node}}")],
       unit="s"),
    removals_and_rebalance("", "max", w=16),
]

V = 'vdi=~"$vdi"'
NBD_LATENCY = ts(
    "NBD latency",
    [q(f'vdi_command:ringcache_nbd_request_duration_seconds:p50_rate1m'
       f'{{{V}, command=~"read|write"}}', "{{vdi}} p50 {{command}}"),
     q(f'vdi_command:ringcache_nbd_request_duration_seconds:p99_rate1m'
       f'{{{V}, command=~"read|write"}}', "{{vdi}} p99 {{command}}")],
    unit="s", desc="NBD request latency at the gateway, per VDI.")
VDI = [
    row("Client I/O (NBD)"),
    ts("NBD requests", [q(f'vdi_command:ringcache_nbd_requests:rate1m{{{V}}}',
                          "{{vdi}} {{command}}")],
       unit="iops", desc="NBD requests the gateways answered for the VDI, by command."),
    ts("NBD throughput", [q(f'vdi_direction:ringcache_nbd_bytes:rate1m{{{V}}}',
                            "{{vdi}} {{direction}}")], unit="Bps"),
    NBD_LATENCY,
    row("Block I/O (cache nodes)"),
    ts("Block ops", [q(f"sum by (vdi) (rate(ringcache_vdi_reads_total{{{V}}}[{RI}]))",
                       "{{vdi}} read"),
                     q(f"sum by (vdi) (rate(ringcache_vdi_writes_total{{{V}}}[{RI}]))",
                       "{{vdi}} write"),
                     q(f"vdi:ringcache_vdi_block_ops:rate1m{{{V}}}", "{{vdi}} total (1m)")],
       unit="iops", w=12,
       desc="Block reads (prefetch included) and writes the cache nodes served for the VDI."),
    ts("Block bytes", [q(f"sum by (vdi) (rate(ringcache_vdi_reads_total{{{V}}}[{RI}])) * 4096",
                         "{{vdi}} read"),
                       q(f"sum by (vdi) (rate(ringcache_vdi_writes_total{{{V}}}[{RI}])) * 4096",
                         "{{vdi}} write"),
                       q(f"vdi:ringcache_vdi_block_bytes:rate1m{{{V}}}", "{{vdi}} total (1m)")],
       unit="Bps", w=12, desc="Block operations times the 4 KiB block size."),
    row("Cache"),
    ts("Hit ratio", [q(f"vdi:ringcache_vdi_hit:ratio_rate1m{{{V}}}", "{{vdi}}"),
                     q(f"sum by (vdi, node) (rate(ringcache_vdi_hits_ram_total{{{V}}}[{RI}])"
                       f" + rate(ringcache_vdi_hits_ssd_total{{{V}}}[{RI}]))"
                       f" / sum by (vdi, node) (rate(ringcache_vdi_hits_ram_total{{{V}}}[{RI}])"
                       f" + rate(ringcache_vdi_hits_ssd_total{{{V}}}[{RI}])"
                       f" + rate(ringcache_vdi_misses_total{{{V}}}[{RI}]))",
                       "{{vdi}} node {{node}}")],
       unit="percentunit", lo=0, hi=1),
    ts("Reads by tier", [q(f"sum by (vdi) (rate(ringcache_vdi_hits_ram_total{{{V}}}[{RI}]))",
                           "{{vdi}} RAM hit"),
                         q(f"sum by (vdi) (rate(ringcache_vdi_hits_ssd_total{{{V}}}[{RI}]))",
                           "{{vdi}} SSD hit"),
                         q(f"sum by (vdi) (rate(ringcache_vdi_misses_total{{{V}}}[{RI}]))",
                           "{{vdi}} miss")], unit="ops", stack=True),
    ts("Bypassed and not admitted",
       [q(f"sum by (vdi) (rate(ringcache_vdi_bypassed_total{{{V}}}[{RI}]))", "{{vdi}} bypassed"),
        q(f"sum by (vdi) (rate(ringcache_vdi_admissions_rejected_total{{{V}}}[{RI}]))",
          "{{vdi}} admission declined")], unit="ops"),
    ts("Dirty bytes", [q(f"vdi:ringcache_vdi_dirty_bytes:sum{{{V}}}", "{{vdi}}"),
                       q(f"ringcache_vdi_dirty_bytes{{{V}}}", "{{vdi}} node {{node}}")],
       unit="bytes"),
    ts("Oldest dirty block", [q(f"max by (vdi) (ringcache_vdi_oldest_dirty_seconds{{{V}}})",
                                "{{vdi}}")],
       unit="s", desc="How long the VDI's oldest dirty block has waited for its destage (the "
       "oldest over the cache nodes); it grows while the data nodes do not take destages."),
    ts("Destage rate", [q(f"vdi:ringcache_vdi_destage_bytes:rate1m{{{V}}}", "{{vdi}}")],
       unit="Bps"),
    ts("Queue (VBQ) length", [q(f"ringcache_vdi_queue_blocks{{{V}}}", "{{vdi}} node {{node}}"),
                              q(f"ringcache_vdi_queue_max_blocks{{{V}}}",
                                "{{vdi}} node {{node}} max")],
       desc="Blocks in the VDI's queue on each cache node and its maximum length L_m."),
    ts("Queue (VBQ) bounds", [q(f"ringcache_vdi_queue_upper_bound{{{V}}}",
                                "{{vdi}} node {{node}} upper"),
                              q(f"ringcache_vdi_queue_lower_bound{{{V}}}",
                                "{{vdi}} node {{node}} lower")],
       unit="percentunit", w=16),
]

I = 'instance="$instance"'
NODE = [
    row("Process"),
    stat("Up", [q(f"up{{{I}}}")], thresholds=steps(("red", None), ("green", 1)), w=3),
    stat("Uptime", [q(f"time() - process_start_time_seconds{{{I}}}")], unit="s", w=3),
    stat("Build", [q(f"ringcache_build_info{{{I}}}", "{{role}} {{version}}")], w=6,
         text_mode="name"),
    stat("Open fds", [q(f"process_open_fds{{{I}}}")], w=3),
    stat("Resident memory", [q(f"process_resident_memory_bytes{{{I}}}")], unit="bytes", w=3),
    stat("CPU", [q(f"rate(process_cpu_seconds_total{{{I}}}[{RI}])")], unit="percentunit", w=6),
    ts("CPU", [q(f"rate(process_cpu_seconds_total{{{I}}}[{RI}])", "cores")],
       unit="percentunit", desc="CPU time per second (1 = one core busy)."),
    ts("Resident memory", [q(f"process_resident_memory_bytes{{{I}}}", "RSS")], unit="bytes"),
    ts("Open file descriptors", [q(f"process_open_fds{{{I}}}", "fds")]),
    row("Cache node"),
    ts("SSD slots", [q(f"ringcache_cachenode_free_slots{{{I}}}", "free slots"),
                     q(f"ringcache_cachenode_cached_blocks{{{I}}}", "cached blocks")]),
    ts("Dirty", [q(f"ringcache_cachenode_dirty_bytes{{{I}}}", "dirty bytes")], unit="bytes"),
    ts("Dirty share of SSD slots", [q(f"instance:ringcache_cachenode_dirty_slots:ratio{{{I}}}",
                                      "dirty / slots")],
       unit="percentunit", lo=0, thresholds=steps(("green", None), ("red", 0.6))),
    ts("Evictions and slot waits",
       [q(f"rate(ringcache_cachenode_evictions_total{{{I}}}[{RI}])", "evictions"),
        q(f"rate(ringcache_cachenode_slot_waits_total{{{I}}}[{RI}])", "slot waits")],
       unit="ops"),
    ts("Hit ratio", [q(f"instance:ringcache_vdi_hit:ratio_rate1m{{{I}}}", "hit ratio")],
       unit="percentunit", lo=0, hi=1),
    ts("Block requests", [q(f"sum by (op) (rate(ringcache_cachenode_data_requests_total"
                            f"{{{I}}}[{RI}]))", "{{op}}")], unit="reqps"),
    ts("Destage", [q(f"rate(ringcache_cachenode_destage_bytes_total{{{I}}}[{RI}])", "bytes/s")],
       unit="Bps"),
    ts("Destage problems",
       [q(f"rate(ringcache_cachenode_destage_errors_total{{{I}}}[{RI}])", "errors"),
        q(f"rate(ringcache_cachenode_obsolete_blocks_discarded_total{{{I}}}[{RI}])",
          "obsolete discarded")], unit="ops"),
    ts("Data node latency p99 (seen here)",
       [q(p99("ringcache_cachenode_datanode_op_duration_seconds", "datanode", I),
          "data node {{datanode}}")], unit="s"),
    ts("Write-back log records",
       [q(f"rate(ringcache_cachenode_log_records_appended_total{{{I}}}[{RI}])", "appended"),
        q(f"rate(ringcache_cachenode_log_records_retired_total{{{I}}}[{RI}])", "retired"),
        q(f"rate(ringcache_cachenode_log_records_collected_total{{{I}}}[{RI}])", "collected"),
        q(f"rate(ringcache_cachenode_log_overlap_records_total{{{I}}}[{RI}])", "overlapping")],
       unit="ops"),
    ts("Write-back log state",
       [q(f"ringcache_cachenode_log_pending_reclaims{{{I}}}", "pending reclaims"),
        q(f"ringcache_cachenode_log_over_limit{{{I}}}", "over limit"),
        q(f"rate(ringcache_cachenode_log_append_failures_total{{{I}}}[{RI}])",
          "append failures/s")]),
    ts("Fencing", [q(f"ringcache_cachenode_ring_epoch{{{I}}}", "ring epoch"),
                   q(f"ringcache_cachenode_quarantined{{{I}}}", "quarantined"),
                   q(f"ringcache_cachenode_device_failed{{{I}}}", "device failed"),
                   q(f"rate(ringcache_cachenode_fenced_requests_total{{{I}}}[{RI}])",
                     "fenced requests/s"),
                   q(f"rate(ringcache_cachenode_stale_epoch_requests_total{{{I}}}[{RI}])",
                     "stale epoch requests/s")]),
    row("Data node"),
    ts("Log area", [q(f"ringcache_datanode_log_bytes{{{I}}}", "bytes")], unit="bytes"),
    ts("Log records", [q(f"ringcache_datanode_log_records{{{I}}}", "held"),
                       q(f"rate(ringcache_datanode_log_records_appended_total{{{I}}}[{RI}])",
                         "appended/s"),
                       q(f"rate(ringcache_datanode_log_records_reclaimed_total{{{I}}}[{RI}])",
                         "reclaimed/s"),
                       q(f"rate(ringcache_datanode_log_over_limit_total{{{I}}}[{RI}])",
                         "over_limit answers/s")]),
    ts("Requests", [q(f'sum by (op) (rate(ringcache_datanode_requests_total{{{I}, result="ok"}}'
                      f'[{RI}]))', "{{op}}")], unit="reqps"),
    ts("Request errors", [q(f'sum by (op) (rate(ringcache_datanode_requests_total'
                            f'{{{I}, result="error"}}[{RI}]))', "{{op}}")], unit="reqps"),
    ts("Latency p99", [q(p99("ringcache_datanode_request_duration_seconds", "op", I), "{{op}}")],
       unit="s"),
    ts("Block bytes", [q(f"rate(ringcache_datanode_read_bytes_total{{{I}}}[{RI}])", "read"),
                       q(f"rate(ringcache_datanode_written_bytes_total{{{I}}}[{RI}])",
                         "written")], unit="Bps"),
    ts("Blocks stored", [q(f"ringcache_datanode_blocks{{{I}}}", "blocks")]),
    ts("Integrity", [q(f"ringcache_datanode_device_failed{{{I}}}", "device failed"),
                     q(f"increase(ringcache_datanode_checksum_failures_total{{{I}}}[1h])",
                       "checksum failures (1h)"),
                     q(f"rate(ringcache_datanode_older_version_refusals_total{{{I}}}[{RI}])",
                       "older-version refusals/s")], w=16),
    row("Gateway"),
    ts("NBD requests", [q(f'sum by (command) (rate(ringcache_nbd_requests_total'
                          f'{{{I}, command!="disc"}}[{RI}]))', "{{command}}")], unit="reqps"),
    ts("NBD connections", [q(f"ringcache_nbd_connections{{{I}}}", "open"),
                           q(f"rate(ringcache_nbd_connections_accepted_total{{{I}}}[{RI}])",
                             "accepted/s"),
                           q(f"rate(ringcache_nbd_connections_rejected_total{{{I}}}[{RI}])",
                             "rejected/s")]),
    ts("NBD protocol errors", [q(f"sum by (reason) (rate(ringcache_nbd_protocol_errors_total"
                                 f"{{{I}}}[{RI}])) or vector(0)", "{{reason}}")],
       unit="ops", desc="Connections ended because the client broke the protocol (0 if none)."),
    ts("Cache calls", [q(f"sum by (node, code) (rate(ringcache_gateway_cache_calls_total"
                         f"{{{I}}}[{RI}]))", "node {{node}} {{code}}"),
                       q(f"sum by (node, reason) (rate(ringcache_gateway_cache_call_retries_total"
                         f"{{{I}}}[{RI}]))", "node {{node}} retries {{reason}}")],
       unit="reqps"),
    ts("Cache call latency p99",
       [q(p99("ringcache_gateway_cache_call_duration_seconds", "node", I), "node {{node}}")],
       unit="s"),
    ts("Ring epochs", [q(f"ringcache_gateway_ring_epoch{{{I}}}", "cache ring"),
                       q(f"ringcache_gateway_data_epoch{{{I}}}", "data ring")]),
    removals_and_rebalance(I, "", w=16),
]

DASHBOARDS = {
    "ringcache-overview.json": dashboard(
        "ringcache-overview", "ringcache / Cluster overview",
        "Health, client I/O, cache efficiency, dirty data and destage of a ringcache cluster.",
        OVERVIEW),
    "ringcache-vdi.json": dashboard(
        "ringcache-vdi", "ringcache / VDI",
        "I/O, latency, hit ratio and dirty data of one or more VDIs.", VDI,
        [query_variable("vdi", "VDI", "label_values(ringcache_vdi_reads_total, vdi)",
                        multi=True, include_all=True)]),
    "ringcache-node.json": dashboard(
        "ringcache-node", "ringcache / Node",
        "One ringcache process: resources, and the metrics of its role "
        "(cache node, data node or gateway; the other roles' rows stay empty).", NODE,
        [query_variable("job", "Role", f"label_values(up{{{JOBS}}}, job)"),
         query_variable("instance", "Instance", 'label_values(up{job="$job"}, instance)')]),
}


def main():
    check = "--check" in sys.argv[1:]
    os.makedirs(OUT, exist_ok=True)
    stale = []
    for name, d in DASHBOARDS.items():
        text = json.dumps(d, indent=2) + "\n"
        path = os.path.join(OUT, name)
        if check:
            if not os.path.exists(path) or open(path).read() != text:
                stale.append(name)
        else:
            with open(path, "w") as f:
                f.write(text)
    if stale:
        print("out of date (run deploy/grafana/generate.py):", " ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
