#!/usr/bin/env python3
"""Formats ringcache-sim --json output (one object per line on stdin) as a Markdown table.

Used by tools/sim/experiments.sh. Columns (comma-separated in --cols):
  FIELD            a top-level JSON field (policy, size_blocks, replacements, ...)
  hit%             100 * hit_ratio
  FIELD/POLICY     FIELD divided by the same FIELD of POLICY's row with the same size_blocks
  POLICY/FIELD     POLICY's FIELD divided by this row's (a reduction factor, e.g. lru/ssd_writes)
  hits             hits_ram + hits_ssd
  gap:P1|P2        hit% minus the best hit% of policies P1, P2, ... at the same size (points)
With --vdi, one row per (result, VDI) and VDI columns: name, vdi, accesses, hit%, share%
(accesses / all accesses), occupancy_mean, occupancy_end, A_m, q_blocks, L_m, U_i, D_i, U-D;
and a line per result saying whether paper 002 eq. 6 (U_i - D_i grows as A_m falls) holds.
"""
import argparse
import json
import sys


def hits(r):
    return r["hits_ram"] + r["hits_ssd"]


def value(r, col, rows):
    if col.startswith("gap:"):
        refs = [find(rows, p, r["size_blocks"]) for p in col[4:].split("|")]
        best = max((100.0 * x["hit_ratio"] for x in refs if x), default=None)
        return None if best is None else 100.0 * r["hit_ratio"] - best
    if col == "hit%":
        return 100.0 * r["hit_ratio"]
    if col == "hits":
        return hits(r)
    if "/" in col:
        a, b = col.split("/", 1)
        if a in r or a == "hits":  # FIELD/POLICY
            field, other = a, b
            ref = find(rows, other, r["size_blocks"])
            num, den = value(r, field, rows), (value(ref, field, rows) if ref else None)
        else:  # POLICY/FIELD
            other, field = a, b
            ref = find(rows, other, r["size_blocks"])
            num, den = (value(ref, field, rows) if ref else None), value(r, field, rows)
        if num is None or den in (None, 0):
            return None
        return num / den
    return r.get(col)


def find(rows, policy, size):
    for r in rows:
        if r["policy"] == policy and r["size_blocks"] == size:
            return r
    return None


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if abs(v) >= 1000:
            return "%.1f" % v
        if abs(v) >= 10:
            return "%.2f" % v
        if abs(v) >= 1:
            return "%.3f" % v
        return "%.4f" % v
    return str(v)


def table(header, body):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(out)


def vdi_value(r, v, col):
    q = v.get("queue", {})
    total = sum(x["accesses"] for x in r["per_vdi"]) or 1
    return {
        "hit%": 100.0 * v["hit_ratio"],
        "share%": 100.0 * v["accesses"] / total,
        "A_m": q.get("accesses"),
        "q_blocks": q.get("blocks"),
        "L_m": q.get("max_blocks"),
        "U_i": q.get("upper"),
        "D_i": q.get("lower"),
        "U-D": (q["upper"] - q["lower"]) if q else None,
    }.get(col, v.get(col))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cols", required=True)
    ap.add_argument("--vdi", default="")
    args = ap.parse_args()
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    cols = args.cols.split(",")
    if not args.vdi:
        print(table(cols, [[fmt(value(r, c, rows)) for c in cols] for r in rows]))
        return
    vcols = args.vdi.split(",")
    body = []
    notes = []
    for r in rows:
        for v in r["per_vdi"]:
            body.append([fmt(value(r, c, rows)) for c in cols] +
                        [fmt(vdi_value(r, v, c)) for c in vcols])
        queues = [v["queue"] for v in r["per_vdi"] if "queue" in v]
        if queues:
            by_heat = sorted(queues, key=lambda q: -q["accesses"])
            gaps = [q["upper"] - q["lower"] for q in by_heat]
            ok = all(gaps[i] <= gaps[i + 1] + 1e-12 for i in range(len(gaps) - 1))
            notes.append("%s size %d: eq. 6 (U_i - D_i non-decreasing from hottest to coldest: %s)"
                         " %s" % (r["policy"], r["size_blocks"],
                                  ", ".join("%.4f" % g for g in gaps), "holds" if ok else "FAILS"))
    print(table(cols + vcols, body))
    for n in notes:
        print("\n" + n)


if __name__ == "__main__":
    main()
