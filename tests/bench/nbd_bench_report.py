#!/usr/bin/env python3
"""Helper of tests/bench/nbd_bench.sh: parses fio JSON, sums ringcache /metrics counters, and
prints the benchmark tables with the ringcache/qemu-nbd ratios and the issue's aims.

  nbd_bench_report.py fio FILE.json [SRV_TICKS MACHINE_TICKS WALL_S]
      -> "IOPS P50_US P99_US FIO_CPU_PCT SRV_CPU_US_PER_OP OTHER_CPU_PCT"
         SRV_TICKS: CPU clock ticks of the servers during the run; MACHINE_TICKS: busy ticks of the
         whole machine (all CPUs) in the same window of WALL_S seconds. OTHER_CPU_PCT is the CPU
         used by everything else (other users of the machine), in % of one CPU.
  nbd_bench_report.py metrics VDI URL...       -> "READS HITS_RAM HITS_SSD MISSES DIRTY_BYTES"
  nbd_bench_report.py cputicks PID...          -> "PROCESS_TICKS MACHINE_BUSY_TICKS": user+system
                                                  ticks of the processes, and busy ticks of all CPUs
  nbd_bench_report.py zipf-trace OUT BLOCKS THETA COUNT SEED READ_PCT BS NAME
                                               -> a fio v2 iolog of Zipf accesses (see Zipf)
  nbd_bench_report.py zipf-info BLOCKS THETA CACHE_BLOCKS BS
  nbd_bench_report.py report RESULTS.tsv [--markdown]

RESULTS.tsv has one line per measured run, tab-separated:
  part workload system iops p50_us p99_us block_reads block_hits server_cpu_us_per_op
  fio_cpu_pct load1 other_cpu_pct
(block_reads/block_hits are '-' for systems without ringcache metrics.)
"""
import bisect
import itertools
import json
import os
import random
import sys
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")


def fio_summary(path):
    """Returns (iops, p50_us, p99_us, fio_cpu_pct, total_ios, runtime_s) of the only job of a
    fio JSON file (fio_cpu_pct: the job's user+system CPU in % of one CPU)."""
    with open(path) as f:
        text = f.read()
    # ioengine=nbd prints "fio: connected to NBD server" on stdout; tolerate it before the JSON.
    text = text[text.index("{"):]
    job = json.loads(text)["jobs"][0]
    if job.get("error"):
        raise SystemExit(f"{path}: fio job error {job['error']}")
    sides = [job[s] for s in ("mixed", "read", "write") if s in job and job[s]["total_ios"] > 0]
    if not sides:
        raise SystemExit(f"{path}: no I/O recorded")
    side = sides[0]  # "mixed" when unified_rw_reporting=mixed, else the side that did I/O
    iops = side["iops"]
    pct = side["clat_ns"]["percentile"]
    cpu = job["usr_cpu"] + job["sys_cpu"]
    if "mixed" in job:
        ios = side["total_ios"]
    else:
        ios = sum(job[s]["total_ios"] for s in ("read", "write") if s in job)
    return (iops, pct["50.000000"] / 1000.0, pct["99.000000"] / 1000.0, cpu, ios,
            job["job_runtime"] / 1000.0)


def metrics_summary(vdi, urls):
    """Sums the per-VDI block counters over every cache node's /metrics."""
    want = {
        "ringcache_vdi_reads_total": 0.0,
        "ringcache_vdi_hits_ram_total": 0.0,
        "ringcache_vdi_hits_ssd_total": 0.0,
        "ringcache_vdi_misses_total": 0.0,
        "ringcache_vdi_dirty_bytes": 0.0,
    }
    label = f'vdi="{vdi}"'
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("#") or label not in line:
                    continue
                name = line.split("{", 1)[0]
                if name in want:
                    want[name] += float(line.rsplit(" ", 1)[1])
    return [int(v) for v in want.values()]


class Zipf:
    """Zipf(theta) over `blocks` ranks; rank r (1 = hottest) has weight r^-theta. A fixed
    permutation (seed 4242, independent of the sampling seed) maps ranks to block numbers, so every
    trace made from the same (blocks, theta) has the same hot set at the same places while the
    samples themselves differ with the seed."""

    def __init__(self, blocks, theta):
        self.blocks = blocks
        self.cdf = list(itertools.accumulate(r ** -theta for r in range(1, blocks + 1)))
        self.total = self.cdf[-1]
        self.perm = list(range(blocks))
        random.Random(4242).shuffle(self.perm)

    def coverage(self, top):
        """Fraction of accesses that go to the `top` hottest blocks."""
        return self.cdf[min(top, self.blocks) - 1] / self.total

    def hot_set(self, fraction):
        """Number of hottest blocks that receive `fraction` of the accesses."""
        return bisect.bisect_left(self.cdf, fraction * self.total) + 1

    def sample(self, rng):
        return self.perm[bisect.bisect_left(self.cdf, rng.random() * self.total)]


def zipf_trace(path, blocks, theta, count, seed, read_pct, bs, name):
    """Writes a fio v2 iolog of `count` Zipf accesses (read_pct % reads, the rest writes)."""
    z = Zipf(blocks, theta)
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write(f"fio version 2 iolog\n{name} add\n{name} open\n")
        for _ in range(count):
            op = "read" if rng.random() * 100 < read_pct else "write"
            f.write(f"{name} {op} {z.sample(rng) * bs} {bs}\n")
        f.write(f"{name} close\n")


def zipf_info(blocks, theta, cache_blocks, bs):
    z = Zipf(blocks, theta)
    h90, h95 = z.hot_set(0.90), z.hot_set(0.95)
    mib = lambda n: n * bs / 1048576
    print(f"Zipf({theta}) over {blocks} blocks: 90% of accesses go to the hottest {h90} blocks "
          f"({mib(h90):.1f} MiB), 95% to {h95} ({mib(h95):.1f} MiB); a cache holding the "
          f"{cache_blocks} hottest blocks ({mib(cache_blocks):.0f} MiB) would hit "
          f"{100 * z.coverage(cache_blocks):.1f}%")


def machine_busy_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...: busy = all but idle and iowait
    return sum(v) - v[3] - v[4]


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        except (OSError, IndexError, ValueError):
            pass
    return total


# --------------------------------------------------------------------------------------------
# Report

WORKLOADS_A = [
    ("randread-4k-qd1", "4K random read QD1"),
    ("randread-4k-qd32", "4K random read QD32"),
    ("randwrite-4k-qd32", "4K random write QD32"),
    ("randwrite-4k-qd1", "4K random write QD1"),
    ("seqread-1m-qd4", "1M sequential read QD4"),
    ("seqwrite-1m-qd4", "1M sequential write QD4"),
    ("randread-4k-qd32-4vdis", "4K random read QD32, 4 jobs on 4 VDIs (sum)"),
]
WORKLOADS_B = [
    ("zipf-randread-4k-qd32", "Zipf(1.2) 4K random read QD32"),
    ("zipf-randrw70-4k-qd32", "Zipf(1.2) 4K 70% read/30% write QD32"),
]
ANCHOR_A = "qemu-nbd"
ANCHOR_B = "passthrough"


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 12 or p[0] == "part":
                continue
            rows.append({
                "part": p[0], "workload": p[1], "system": p[2], "iops": float(p[3]),
                "p50": float(p[4]), "p99": float(p[5]),
                "reads": None if p[6] == "-" else int(p[6]),
                "hits": None if p[7] == "-" else int(p[7]),
                "cpu_us": float(p[8]), "fio_cpu": float(p[9]), "load1": p[10],
                "other": p[11],
            })
    return rows


def fmt_int(x):
    return f"{x:,.0f}"


def tls_anchor(system):
    """Part T: a TLS system's anchor is the same server in plaintext ("cluster+tls" -> "cluster")."""
    return system[:-len("+tls")] if system.endswith("+tls") else None


def table(rows, workloads, anchor, md, title, anchor_name=None):
    """`anchor`: the system every other one is compared with, or a function giving each system's
    anchor (None: no ratio)."""
    out = []
    head = ["workload", "system", "IOPS", "p50 µs", "p99 µs",
            f"ratio vs {anchor_name or anchor}", "block hit %", "server CPU µs/op",
            "other CPU %"]
    body = []
    for key, label in workloads:
        runs = [r for r in rows if r["workload"] == key]
        if not runs:
            continue
        for r in runs:
            wanted = anchor(r["system"]) if callable(anchor) else anchor
            base = next((b for b in runs if b["system"] == wanted), None)
            ratio = ""
            if base and r is not base and base["iops"] > 0:
                ratio = f"{r['iops'] / base['iops']:.2f}× IOPS"
                if key.endswith("qd1"):
                    ratio += f", {r['p50'] / base['p50']:.2f}× p50"
            hit = ""
            if r["reads"]:
                hit = f"{100.0 * r['hits'] / r['reads']:.1f}"
            cpu = f"{r['cpu_us']:.1f}" if r["cpu_us"] >= 0 else ""
            body.append([label, r["system"], fmt_int(r["iops"]), f"{r['p50']:.0f}",
                         f"{r['p99']:.0f}", ratio, hit, cpu, r["other"]])
    if not body:
        return ""
    if md:
        out.append(f"**{title}**\n")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---"] * len(head)) + "|")
        for b in body:
            out.append("| " + " | ".join(b) + " |")
    else:
        out.append(title)
        widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))
        out.append(line(head))
        out.append(line(["-" * w for w in widths]))
        out.extend(line(b) for b in body)
    return "\n".join(out) + "\n"


def find(rows, workload, system):
    return next((r for r in rows if r["workload"] == workload and r["system"] == system), None)


def aims(all_rows, md):
    checks = []
    rows = [r for r in all_rows if r["part"] != "T"]  # Part T reuses Part A's system names

    def ratio_check(desc, workload, system, anchor, aim, metric="iops", lower_is_better=False):
        r, b = find(rows, workload, system), find(rows, workload, anchor)
        if not r or not b or b[metric] == 0:
            return
        v = r[metric] / b[metric]
        ok = v <= aim if lower_is_better else v >= aim
        cmp = "≤" if lower_is_better else "≥"
        if aim == 0:
            checks.append(f"{desc}: {v:.2f}×")
        else:
            checks.append(f"{desc}: {v:.2f}× (aim {cmp} {aim}×) — {'MET' if ok else 'MISSED'}")

    ratio_check("A. 4K random read QD32, ringcache-local / qemu-nbd IOPS", "randread-4k-qd32",
                "ringcache-local", ANCHOR_A, 1.2)
    ratio_check("A. 4K random read QD32, cluster / qemu-nbd IOPS", "randread-4k-qd32",
                "cluster", ANCHOR_A, 0.8)
    ratio_check("A. 4K random read QD1 p50 latency, cluster / qemu-nbd", "randread-4k-qd1",
                "cluster", ANCHOR_A, 1.5, "p50", True)
    ratio_check("A. server CPU per 4K read (QD32), cluster / ringcache-local", "randread-4k-qd32",
                "cluster", "ringcache-local", 1.5, "cpu_us", True)
    ratio_check("A. 1M sequential read QD4, ringcache-local / qemu-nbd IOPS", "seqread-1m-qd4",
                "ringcache-local", ANCHOR_A, 1.0)
    # Issue 35's aims: the cluster's durable writes against qemu-nbd --cache=writethrough (every
    # write durable before its reply on both sides), its 1M reads, its CPU per durable write.
    ratio_check("A. 1M sequential read QD4, cluster / qemu-nbd IOPS", "seqread-1m-qd4",
                "cluster", ANCHOR_A, 0.9)
    ratio_check("A. durable 4K random write QD32, ringcache-local / qemu-nbd --cache=writethrough",
                "randwrite-4k-qd32", "ringcache-local", "qemu-nbd-wt", 1.0)
    ratio_check("A. durable 4K random write QD32, cluster / qemu-nbd --cache=writethrough",
                "randwrite-4k-qd32", "cluster", "qemu-nbd-wt", 1.2)
    ratio_check("A. durable 4K random write QD1 p50 latency, cluster / qemu-nbd --cache=writethrough",
                "randwrite-4k-qd1", "cluster", "qemu-nbd-wt", 1.0, "p50", True)
    ratio_check("A. durable 1M sequential write QD4, cluster / qemu-nbd --cache=writethrough",
                "seqwrite-1m-qd4", "cluster", "qemu-nbd-wt", 0.9)
    ratio_check("A. server CPU per durable 4K write (QD32), cluster / qemu-nbd --cache=writethrough",
                "randwrite-4k-qd32", "cluster", "qemu-nbd-wt", 1.5, "cpu_us", True)
    for key, label in WORKLOADS_B:
        ratio_check(f"B. {label}, writeback / passthrough IOPS", key, "writeback", ANCHOR_B, 3.7)
    # Part T: TLS / plaintext of the same server; issue 35's aims for the cluster (TLS on every
    # port) on 4K random reads QD32 and 1M sequential reads, the others reported.
    t_rows = [r for r in all_rows if r["part"] == "T"]
    t_aims = {("cluster", "randread-4k-qd32"): 0.95, ("cluster", "seqread-1m-qd4"): 0.85}
    for key, label in WORKLOADS_A:
        for system in ("qemu-nbd", "ringcache-local", "cluster"):
            r, b = find(t_rows, key, system + "+tls"), find(t_rows, key, system)
            if r and b and b["iops"] > 0:
                v = r["iops"] / b["iops"]
                line = f"T. {label}, {system} TLS / plaintext IOPS: {v:.2f}×"
                aim = t_aims.get((system, key))
                if aim is not None:
                    line += f" (aim ≥ {aim}×) — {'MET' if v >= aim else 'MISSED'}"
                checks.append(line)
    if not checks:
        return ""
    prefix = "- " if md else "  "
    return ("**Aims**\n\n" if md else "Aims\n") + "\n".join(prefix + c for c in checks) + "\n"


def report(path, md):
    rows = load(path)
    a = [r for r in rows if r["part"] == "A"]
    b = [r for r in rows if r["part"] == "B"]
    t = [r for r in rows if r["part"] == "T"]
    parts = [
        table(a, WORKLOADS_A, ANCHOR_A, md,
              "Part A — working set cached (ratio: ringcache / qemu-nbd)"),
        table(b, WORKLOADS_B, ANCHOR_B, md,
              "Part B — HDD-emulated data nodes, Zipf hot set (ratio: writeback / passthrough)"),
        table(t, WORKLOADS_A, tls_anchor, md,
              "Part T — the cost of TLS (ratio: TLS / plaintext, same server)", "plaintext"),
        aims(rows, md),
    ]
    print("\n".join(p for p in parts if p))


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    cmd = argv[1]
    if cmd == "fio":
        iops, p50, p99, cpu, ios, runtime = fio_summary(argv[2])
        srv, other = -1.0, -1.0
        if len(argv) > 5 and ios > 0:
            srv_s = int(argv[3]) / CLK_TCK
            srv = srv_s * 1e6 / ios
            wall = float(argv[5])
            other = (int(argv[4]) / CLK_TCK - srv_s - cpu / 100 * runtime) / wall * 100
            other = max(other, 0.0)
        print(f"{iops:.1f} {p50:.1f} {p99:.1f} {cpu:.1f} {srv:.1f} {other:.0f}")
    elif cmd == "metrics":
        print(" ".join(str(v) for v in metrics_summary(argv[2], argv[3:])))
    elif cmd == "cputicks":
        print(cpu_ticks(argv[2:]), machine_busy_ticks())
    elif cmd == "zipf-trace":
        out, blocks, theta, count, seed, read_pct, bs, name = argv[2:10]
        zipf_trace(out, int(blocks), float(theta), int(count), int(seed), float(read_pct),
                   int(bs), name)
    elif cmd == "zipf-info":
        zipf_info(int(argv[2]), float(argv[3]), int(argv[4]), int(argv[5]))
    elif cmd == "report":
        report(argv[2], "--markdown" in argv[3:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
