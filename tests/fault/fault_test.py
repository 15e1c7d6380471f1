#!/usr/bin/env python3
"""Fault-injection checker for a ringcache cluster (issue 6 §4 "Proof").

Starts a cluster of separate processes with deploy/cluster.sh (3 cache nodes, 4 data nodes) in a
fresh temporary directory on its own ports, creates one VDI per replication factor (default 2 and
3), and runs one phase per VDI: several writer threads, each with its own NBD connection and its
own disjoint set of 4 KiB blocks, write versioned blocks (a header naming the VDI, the block and
the block's version, then a pattern derived from the header and the seed) with occasional
multi-block writes across 4 MiB object boundaries and occasional reads verified on the spot,
while the main thread injects faults ("nemeses", below) at random moments. Per block it records
the last acknowledged version and every version that was sent but answered with an error or
never answered; a failed write is retried half a second later with new versions.

Modes:
  static (default)  `cluster.sh up`: membership from the cluster file.
  --etcd            cluster mode: `cluster.sh up --etcd` with a cluster file of its own that sets
                    a short etcd lease (--lease-ttl, default 3 s). The gateway takes a cache node
                    whose lease is gone out of the ring (destage if it answers, else log replay),
                    a restarted or cut-off node comes back quarantined and rejoins.
  --tls             (either mode) `cluster.sh up --tls`: every port under mutual TLS with a
                    throwaway CA. The writers and verifiers connect with STARTTLS and the
                    cluster's client certificate (TLS required), ringcachectl with the admin
                    certificate, etcdctl and the /metrics scrapes over HTTPS with client
                    certificates; every kill, restart and rejoin re-handshakes.

Nemeses (--nemeses, comma list, or `all`):
  kill-cache             kill -9 a cache node, restart it after uniform(0.2, --max-down) s
                         (cluster mode: then wait until the gateway logged its rejoin).
  kill-data              kill -9 1..N-1 data nodes (N: the phase's replication), restart them.
  remove                 static: kill -9 a cache node and `ringcachectl node remove` it for good
                         (its log is replayed; one cache node always stays). Cluster mode: the
                         same, then delete its drained mark in etcd, restart it, wait for rejoin.
  rejoin                 (cluster) kill -9 a cache node, wait until the gateway removed it (its
                         log: "removed"; node list: removed) while the writers go on, restart it,
                         wait until it rejoined: its old dirty data must never reappear.
  pause                  (cluster) SIGSTOP a cache node for lease TTL + uniform(1, 3) s (cut off
                         from everything longer than its lease; --pause-s sets the time), SIGCONT
                         (heal): it finds its lease lost, stays quarantined, and rejoins once the
                         gateway settled it.
  data-during-join       (cluster) kill -9 a cache node, restart it, and kill -9 1..N-1 data
                         nodes right as it rejoins (as soon as it is ready, when the gateway
                         logs the start of the join, or the end of its handoff destage),
                         restart them, wait for the rejoin.
  restart-during-replay  (cluster) kill -9 a cache node and restart it as soon as the gateway
                         logs that it replays the node's write-back log; wait for the rejoin.
  kill-coordinator       (cluster, --gateways 2 or more) kill -9 a cache node holding dirty
                         blocks and, once the coordinator logs that it removes the node (at
                         random: as it starts, or once it replays the node's log), kill -9 the
                         coordinator itself. Another gateway must be elected (the takeover time
                         is printed), decide the removal again and finish it; the killed gateway
                         is restarted (it follows), the cache node restarted and rejoined.
                         Writers of the killed gateway reconnect to another one.
  pause-coordinator      (cluster, --gateways 2 or more) kill -9 a cache node; SIGSTOP the
                         coordinator while it removes the node (as the removal starts, or once
                         it replays the node's log) or, after the removal and a restart of the
                         node, while it joins it (as the join starts, or once the moving objects
                         are destaged); hold it past its election lease until another gateway
                         is elected, then SIGCONT it. It wakes up in the middle of a change
                         under a term that ended: the nodes refuse its steps (control steps are
                         fenced by term) and the new coordinator finishes. Wait for the rejoin.
  partition-coordinator  (cluster, --gateways 2 or more) a partial partition: the coordinator cut
                         from one cache node, and that node from etcd, while the other gateways
                         still reach it (loopback_cut.py: iptables rejects what the process's
                         cgroup sends to the other's ports). Its lease lapses; the coordinator
                         cannot destage it, so it seals its write-back log on every data node
                         and replays it. A write the node accepted meanwhile through another
                         gateway is refused by the seal (or by its own lease check), never
                         acknowledged and missed. Heal after the removal; wait for the rejoin.
                         Needs root, iptables and cgroup2; left out (with a note) without them.
  resize-cache           `ringcachectl node resize` a cache node while the writers go on: its SSD
                         and RAM tiers grow to 2-4x --ssd-size and --ram-size, then shrink to
                         uniform(0.25, 0.75) of them (the blocks in the released slots leave,
                         dirty ones destaged first; the checker follows the shrink until the
                         file is cut); half the time the node is killed -9 in the middle of the
                         shrink and restarted (the shrink resumes from the store's record, the
                         RAM size from its own; cluster mode: rejoin waited for); then both
                         grow back. Each SSD resize moves the node's ring weight with its size
                         (objects handed over to and from it; in cluster mode only at feature
                         level 3, which these runs do not raise).
  wipe-cache             kill -9 a cache node, remove its directory (a new, empty SSD: slot
                         file, sequence mark, VDI table, ownership state), restart it after
                         uniform(0.2, --max-down) s: a new store incarnation, which replays the
                         old one's log home before it serves (cluster mode: wait for the rejoin).
  wipe-data              kill -9 one data node, remove its directory (a new, empty disk: its
                         replicas and log copies gone), restart it: reads never see its
                         "absent" as zeros; wait until the coordinator refilled it from the
                         other replicas and every cache node logged again what it held.
  lose-data              kill -9 one data node for good and take it out at once (`ringcachectl
                         datanode out`, the down-out interval cut to nothing; the interval itself
                         is tested by tests/e2e/datanode_out_test.sh): the gateway makes its
                         replicas again on the others, and every cache node logs again what it
                         held. Then the operator replaces it: its directory removed, started,
                         `ringcachectl datanode in`; wait until it joined the data ring again.
  rot-data               kill -9 one data node, flip a byte in 5 of its stored blocks and 5 of
                         its log records (tests/ringcache-rot-store: checksums kept, as a disk's
                         silent corruption), restart it, `ringcachectl scrub start`; wait until
                         its scrub pass is done and nothing it found is left unrepaired (blocks
                         rewritten from good replicas, records' blocks logged again).
  slow-data              one data node's disk turns slow: every fdatasync of its store waits
                         uniform(50, 300) ms (the file-I/O seam, cluster.sh --fault-seams) for
                         uniform(2, --max-down + 2) s, then it is fast again.
  full-data              one data node's disk fills up: its store's writes fail with ENOSPC for
                         uniform(1, --max-down) s (the node fences itself: storage errors are
                         sticky); then space is freed and the node restarted, as an operator
                         does.
  slow-cache, full-cache the same for a cache node's SSD file: slow fdatasyncs; or (cluster
                         mode) ENOSPC on every write: the node fences itself, its writes fail
                         unacknowledged; then space freed, the node restarted, and its rejoin
                         waited for. (In static mode a node fenced by its device stays fenced
                         until it is removed, docs/durability.md.)
  lose-etcd              (cluster, no --tls) etcd's disk is lost: the gateways stopped, etcd killed,
                         its data directory removed, the latest backup's snapshot restored
                         (`ringcachectl backup`: one before the VDIs are created, a new one after
                         each lose-etcd, so the faults in between are what etcd forgets), etcd
                         started on it, `ringcachectl restore` (docs/upgrades.md, "Backup and
                         restore"), the data and cache nodes restarted, the gateways started and
                         every cache node's rejoin waited for. The writers reconnect and send
                         their requests again.
Without --nemeses, static mode runs kill-cache / kill-data as before (--cache-fault-share;
--remove-cache-node turns kill-cache into remove) and cluster mode runs all of them
(kill-coordinator only with --gateways 2 or more). `all` leaves out the disk faults,
wipe-cache, wipe-data, lose-data, rot-data, the slow and full disks and lose-etcd (a refill takes tens of
seconds); name them to run them.

--side-load QD runs fio (4K random reads and writes at queue depth QD and at most 1,000 IOPS,
ioengine=nbd) on a VDI
of its own for the whole run: a stopped node then holds many requests of another VDI, which must
not hold up the writers. --no-write-errors fails the run when any write is answered with an error
or abandoned. The longest gap between two acknowledged writes of one writer is printed.

--gateways G (cluster mode) runs G gateways, every one a coordinator candidate
(`cluster.sh up --gateways G`); writer i connects to gateway i mod G + 1 (and to the next one
that answers when its gateway is down), so every VDI is written through all of them at once.
ringcachectl talks to the elected coordinator (P/coordinator in etcd); the nemeses look for the
coordinator's log lines in every gateway's log. With a list,
faults are dealt from a shuffled deck holding each kind once, so every kind gets its share.

After every fault that took a cache node away and back, each writer reads back its hot chunks and
a random --sweep-share of its other written chunks (stale data of a returning node shows there).
At the end of every phase, and again after `ringcachectl flush` destaged everything, it reads
every block of every VDI. A read (during the run or in these passes) must return the block's
last acknowledged version or one of the later unacknowledged ones. A block is

  stale  when a read returned an older version than the newest acknowledged one, a version that
         was never written, or data of a block that was never written;
  lost   when a read returned zeros after a write was acknowledged, garbage, a damaged or
         misplaced block, or (final passes) a read error.

It prints

    writes acknowledged: X
    faults injected: Y
    blocks verified: Z
    blocks lost: W
    blocks stale: S
    blocks zeroed: 0s
    nemeses: kill-cache=K kill-data=D ...
    fault_test: acknowledged=X faults=Y verified=Z lost=W stale=S zeros=0s

(Z: written blocks read back by the final passes; 0s: of the W lost blocks, those that read
as zeros after an acknowledged write) and exits 1 if W or S > 0, Y is short of
--faults, a daemon died without being killed, a cache node did not come back, or a sanitizer
reported an error in a daemon log. The first bad blocks are named with expected and found
versions, their last acknowledgements, when they were read, the fault step in progress and the
faults between the last acknowledgement and the read; a failing run keeps the daemons' logs (the
path is printed). Exit 2 on bad usage or a cluster that does not start; exit 77 (skipped) in
cluster mode without etcd or etcdctl. --duration SECONDS injects faults for that long instead of
counting them (tests/fault/soak.sh).

Every random choice of the fault schedule comes from --seed (printed at the start), so a failing
schedule can be replayed; the interleaving of writers and faults is timing-dependent.

A request the gateway holds while a cache node restarts is simply waited for (--io-timeout); one
that errors counts as unacknowledged. A request that times out on the client side is abandoned
with its connection, counted as unacknowledged, and its blocks are not written again (the server
may still apply it at any later time). Requests lost with a broken connection (the writer's
gateway killed) are sent again on the next connection, with the same data, as QEMU's NBD client
does after a reconnect: they are not errors the client sees.

Needs the `nbd` module of Debian's python3-libnbd; when the running interpreter lacks it, the
script re-executes itself with /usr/bin/python3. Standard library otherwise.

Usage:
    tests/fault/fault_test.py --bin BUILD_DIR [--seed S] [--faults 24] [--remove-cache-node] ...
    tests/fault/fault_test.py --bin BUILD_DIR --nemeses wipe-data,wipe-cache --faults 6 \
        --vdi-size 128MiB
    tests/fault/fault_test.py --bin BUILD_DIR --etcd --nemeses all --faults 60
    tests/fault/fault_test.py --bin BUILD_DIR --etcd --tls --nemeses all --faults 16
    tests/fault/fault_test.py --bin BUILD_DIR --etcd --gateways 2 --nemeses all --faults 18
    (ctest: FaultInjection.cluster, FaultInjection.disks, FaultInjection.nemeses,
    FaultInjection.tls,
    FaultInjection.gateways; ASan: --bin build-asan;
    soak: tests/fault/soak.sh --duration 3600)
"""

import argparse
import base64
import collections
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

import loopback_cut

BLOCK = 4096
OBJECT = 4 << 20
BLOCKS_PER_OBJECT = OBJECT // BLOCK
CHUNK = 16  # blocks of one ownership chunk; chunks are shifted by CHUNK/2 to straddle objects
MAGIC = b"RCFAULT1"
HEADER = struct.Struct("<8sQQQQ")  # magic, VDI tag, block, version, seed
ZERO_BLOCK = bytes(BLOCK)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ETCD_PREFIX = "/ringcache"
# A node of a cluster file (deploy/cluster.sh's members(): one flow mapping per line).
MEMBER_RE = re.compile(r"^ *- *\{ *role: *([a-z]*), *id: *([0-9]*)")

NEMESES = ("kill-cache", "kill-data", "remove", "rejoin", "pause", "data-during-join",
           "restart-during-replay", "kill-coordinator", "wipe-cache", "wipe-data", "lose-data",
           "rot-data", "slow-data", "full-data", "slow-cache", "full-cache", "pause-coordinator",
           "partition-coordinator", "upgrade", "lose-etcd", "resize-cache")
CLUSTER_ONLY = {"rejoin", "pause", "data-during-join", "restart-during-replay",
                "kill-coordinator", "full-cache", "pause-coordinator", "partition-coordinator",
                "lose-etcd"}
# Need --gateways 2 or more.
MANY_GATEWAYS_ONLY = {"kill-coordinator", "pause-coordinator", "partition-coordinator"}
# Need root, iptables and cgroup2 (loopback_cut.py).
CUTS = {"partition-coordinator"}
# Left out of `all`: the disk faults. A refill copies every replica the node held and takes tens
# of seconds per fault; FaultInjection.disks names both (tests/CMakeLists.txt), so that the runs
# of `all` keep their time and their share of every process fault.
NOT_IN_ALL = {"wipe-data", "wipe-cache", "lose-data", "rot-data", "slow-data", "full-data",
              "slow-cache", "full-cache", "upgrade", "lose-etcd"}
# Need the nodes' fault files (cluster.sh --fault-seams).
DISK_SEAMS = {"slow-data", "full-data", "slow-cache", "full-cache"}
CACHE_NEMESES = {"kill-cache", "remove", "rejoin", "pause", "data-during-join",
                 "restart-during-replay", "kill-coordinator", "wipe-cache", "slow-cache",
                 "full-cache", "pause-coordinator", "partition-coordinator", "resize-cache"}

nbd = None  # the libnbd module, imported after argument parsing so --help works anywhere


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().replace("IB", "").replace("B", "")
    num = t.rstrip("KMG")
    return int(float(num) * units[t[len(num):]])


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="fault_test.py",
        description=__doc__.split("\n\n")[0] + " Injects faults under a versioned write load "
        "and checks that no acknowledged write is lost and no read is stale.",
        epilog="Output: 'writes acknowledged: X', 'faults injected: Y', 'blocks verified: Z', "
        "'blocks lost: W', 'blocks stale: S', then 'fault_test: acknowledged=X faults=Y "
        "verified=Z lost=W stale=S'. Exit 0 pass, 1 check failed, 2 usage or set-up error, 77 "
        "skipped (--etcd without etcd). Example: tests/fault/fault_test.py --bin build --seed 42; "
        "cluster mode with every nemesis: --etcd --nemeses all --faults 60",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin", default=os.environ.get("RINGCACHE_BIN", os.path.join(ROOT, "build")),
                   help="build directory holding the daemons and ringcachectl (RINGCACHE_BIN); "
                   "e.g. build-asan for the sanitizer build")
    p.add_argument("--old-bin", default=None,
                   help="build directory of an earlier release (tests/upgrade/build_release.sh): "
                   "the cluster starts with its daemons, and each 'upgrade' fault moves the next "
                   "daemon to the other release: data nodes, cache nodes, then gateways to --bin, "
                   "the same in reverse back to --old-bin, and so on")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of every random choice (default: a fresh one, printed)")
    p.add_argument("--faults", type=int, default=24,
                   help="faults to inject in total, split evenly over the phases")
    p.add_argument("--duration", type=float, default=0,
                   help="inject faults for this many seconds in total (split evenly over the "
                   "phases) instead of counting them; --faults is then ignored")
    p.add_argument("--etcd", action="store_true",
                   help="cluster mode: etcd membership (cluster.sh up --etcd), leases, quarantine "
                   "and rejoin of returning cache nodes")
    p.add_argument("--tls", action="store_true",
                   help="every port under mutual TLS (cluster.sh up --tls); NBD with STARTTLS and "
                   "the cluster's client certificate")
    p.add_argument("--gateways", type=int, default=1,
                   help="cluster mode: run this many gateways, all coordinator candidates; the "
                   "writers spread over them (writer i on gateway i mod G + 1)")
    p.add_argument("--lease-ttl", type=int, default=3,
                   help="etcd lease TTL of every daemon in cluster mode (seconds, >= 2)")
    p.add_argument("--nemeses", default=None,
                   help="comma list of fault kinds, or 'all' (the kinds the mode supports; "
                   "'all,KIND' adds a kind left out of all): "
                   + ", ".join(NEMESES) + "; default: kill-cache,kill-data by --cache-fault-share "
                   "in static mode, all in cluster mode")
    p.add_argument("--replications", default="2,3",
                   help="one VDI and one phase per replication factor N (comma list); each fault "
                   "of phase N takes down one cache node or 1..N-1 data nodes")
    p.add_argument("--cache-nodes", type=int, default=3)
    p.add_argument("--data-nodes", type=int, default=4)
    p.add_argument("--vdi-size", default="256MiB", help="size of each VDI")
    p.add_argument("--ssd-size", default="32MiB",
                   help="SSD tier of each cache node (smaller than the data written, so eviction, "
                   "destage and read misses to the data nodes happen under the faults)")
    p.add_argument("--ram-size", default="8MiB", help="RAM tier of each cache node")
    p.add_argument("--placement", default=None,
                   help="the cache nodes' RAM/SSD placement, e.g. 'uarc(exclusive)' (cluster "
                   "mode only: it goes into the cluster file)")
    p.add_argument("--writers", type=int, default=6, help="writer threads (NBD connections)")
    p.add_argument("--depth", type=int, default=4, help="requests in flight per writer")
    p.add_argument("--max-iops", type=float, default=0,
                   help="at most this many requests a second from all writers together (each "
                   "writer its share), 0 for no limit; the ctest runs cap their load so that "
                   "several runs and the recoveries they wait for share two cores (the writers "
                   "are closed loops: unlimited, they take all the CPU they are given)")
    p.add_argument("--cache-fault-share", type=float, default=0.5,
                   help="without --nemeses in static mode: probability that a fault hits a "
                   "cache node rather than data nodes")
    p.add_argument("--max-down", type=float, default=3.0,
                   help="a killed daemon stays down for uniform(0.2, this) seconds")
    p.add_argument("--max-gap", type=float, default=4.0,
                   help="time between the end of a fault and the next one is uniform(0.5, this) "
                   "seconds")
    p.add_argument("--sweep-share", type=float, default=0.25,
                   help="after a cache node went away and came back, each writer reads back its "
                   "hot chunks and this share of its other written chunks (0: no sweeps)")
    p.add_argument("--settle-timeout", type=float, default=180.0,
                   help="cluster mode: seconds to wait for the gateway to remove a cache node, "
                   "or for a cache node to rejoin, before failing")
    p.add_argument("--io-timeout", type=float, default=300.0,
                   help="seconds before the client abandons a request (the gateway itself waits "
                   "up to 60 s for a restarting cache node)")
    p.add_argument("--remove-cache-node", action="store_true",
                   help="static mode without --nemeses: remove a killed cache node with "
                   "`ringcachectl node remove` instead of restarting it (its write-back log is "
                   "replayed home) and go on with the rest; one cache node always stays, later "
                   "cache faults hit data nodes instead")
    p.add_argument("--no-flush", action="store_true",
                   help="skip the final `ringcachectl flush` and the verification after it")
    p.add_argument("--base-port", type=int, default=0,
                   help="first port of the cluster (cluster.sh --base-port; default: a free range)")
    p.add_argument("--work-dir", default=None,
                   help="parent of the temporary directory (default $TEST_TMPDIR or /tmp)")
    p.add_argument("--pause-s", type=float, default=0,
                   help="pause: stop the cache node for exactly this long (default: lease TTL + "
                   "uniform(1, 3) s)")
    p.add_argument("--side-load", type=int, default=0, metavar="QD",
                   help="also run fio (ioengine=nbd, 4K random reads and writes at this queue "
                   "depth) on a VDI of its own for the whole run, so that a stuck node holds many "
                   "requests of another VDI; not with --tls")
    p.add_argument("--no-write-errors", action="store_true",
                   help="fail when any write of the checker is answered with an error or "
                   "abandoned (the faults are ones the cluster must hide from its clients)")
    p.add_argument("--keep", action="store_true",
                   help="keep the whole work directory (daemon data too); a failing run keeps its "
                   "logs anyway")
    a = p.parse_args(argv)
    try:
        a.replication_list = [int(x) for x in a.replications.split(",") if x.strip()]
        a.vdi_bytes = parse_size(a.vdi_size)
    except (ValueError, KeyError):
        p.error("bad --replications or --vdi-size")
    if not a.replication_list or min(a.replication_list) < 1:
        p.error("--replications: want factors >= 1")
    if max(a.replication_list) > a.data_nodes:
        p.error("--replications: a factor exceeds --data-nodes")
    if a.vdi_bytes % OBJECT or a.vdi_bytes < 2 * OBJECT:
        p.error("--vdi-size: want a multiple of 4 MiB, at least 8 MiB")
    if a.writers < 1 or a.depth < 1 or a.faults < 0 or a.cache_nodes < 1 or a.duration < 0:
        p.error("--writers, --depth, --cache-nodes must be positive, --faults and --duration "
                "not negative")
    if a.lease_ttl < 2:
        p.error("--lease-ttl: at least 2 s")
    if a.pause_s < 0 or a.side_load < 0 or a.max_iops < 0:
        p.error("--pause-s, --side-load and --max-iops: not negative")
    if a.side_load and a.tls:
        p.error("--side-load: fio's nbd engine speaks no TLS; not with --tls")
    if a.gateways < 1 or (a.gateways > 1 and not a.etcd):
        p.error("--gateways: at least 1; more than one needs cluster mode (--etcd)")
    if a.placement and not a.etcd:
        p.error("--placement needs cluster mode (--etcd): it is written into the cluster file")
    # The kinds this run can inject: cluster mode's need --etcd, the coordinator's two gateways.
    possible = [n for n in NEMESES if (a.etcd or n not in CLUSTER_ONLY)
                and (a.gateways > 1 or n not in MANY_GATEWAYS_ONLY) and n not in NOT_IN_ALL]
    a.no_cuts = loopback_cut.unsupported() if CUTS.intersection(possible) else None
    if a.no_cuts:
        print(f"fault_test: {', '.join(sorted(CUTS))} left out: {a.no_cuts}", file=sys.stderr)
        possible = [n for n in possible if n not in CUTS]
    a.deck = None  # None: the static mode's cache/data coin (--cache-fault-share)
    if a.nemeses is not None:
        names = [x.strip() for x in a.nemeses.split(",") if x.strip()]
        if "all" in names:  # `all`, and the kinds named beside it (all,lose-etcd)
            names = possible + [n for n in names if n != "all" and n not in possible]
        unknown = [n for n in names if n not in NEMESES]
        if unknown or not names:
            p.error(f"--nemeses: unknown {','.join(unknown) or '(empty)'}; want a comma list of "
                    f"{', '.join(NEMESES)} or 'all'")
        if not a.etcd and CLUSTER_ONLY.intersection(names):
            p.error(f"--nemeses: {','.join(sorted(CLUSTER_ONLY.intersection(names)))} need "
                    "cluster mode (--etcd)")
        if a.gateways < 2 and MANY_GATEWAYS_ONLY.intersection(names):
            p.error(f"--nemeses: {','.join(sorted(MANY_GATEWAYS_ONLY.intersection(names)))} "
                    "needs --gateways 2 or more")
        if CUTS.intersection(names) and (a.no_cuts or loopback_cut.unsupported()):
            p.error(f"--nemeses: {','.join(sorted(CUTS.intersection(names)))} cannot run here: "
                    f"{a.no_cuts or loopback_cut.unsupported()}")
        a.deck = list(dict.fromkeys(names))
    elif a.etcd:
        a.deck = possible
    if a.tls and "lose-etcd" in (a.deck or []):
        p.error("--nemeses: lose-etcd restores etcd over plain HTTP; not with --tls")
    if (a.old_bin is None) != ("upgrade" not in (a.deck or [])):
        p.error("--old-bin and the nemesis 'upgrade' go together")
    if a.etcd and a.cache_nodes < 2:
        p.error("--etcd: want at least 2 cache nodes (the last one is never removed, so a "
                "killed one could not rejoin)")
    if a.etcd and a.remove_cache_node:
        p.error("--remove-cache-node is static mode's; in cluster mode use --nemeses with remove")
    return a


def import_nbd():
    """Imports libnbd's module, re-executing under Debian's python3 when this one lacks it."""
    global nbd
    try:
        import nbd as mod  # noqa: PLC0415
    except ImportError:
        system = "/usr/bin/python3"
        if (os.path.exists(system) and not os.environ.get("RC_FAULT_TEST_REEXEC")
                and os.path.realpath(sys.executable) != os.path.realpath(system)):
            os.environ["RC_FAULT_TEST_REEXEC"] = "1"
            sys.stdout.flush()
            os.execv(system, [system, os.path.abspath(__file__)] + sys.argv[1:])
        sys.exit("fault_test.py: no python module 'nbd' (apt-get install python3-libnbd)")
    nbd = mod


def block_data(seed, tag, block, version):
    """Returns the 4 KiB content of `block` of VDI `tag` at `version`: header + seeded pattern."""
    header = HEADER.pack(MAGIC, tag, block, version, seed)
    digest = hashlib.blake2b(header, digest_size=64).digest()
    return header + (digest * (BLOCK // 64))[:BLOCK - HEADER.size]


class Log:
    """Timestamped progress lines (seconds since start), flushed so ctest shows them live."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.mu = threading.Lock()

    def now(self):
        return time.monotonic() - self.t0

    def __call__(self, msg):
        with self.mu:
            print(f"[{self.now():7.1f}s] {msg}", flush=True)


# --------------------------------------------------------------------------------------------
# The cluster, through deploy/cluster.sh and ringcachectl.

class Cluster:
    def __init__(self, args, work, base, log):
        self.args, self.dir, self.base, self.log = args, os.path.join(work, "cluster"), base, log
        self.bin = os.path.abspath(args.bin)
        # The build each daemon runs from: --old-bin's until an upgrade step moves it.
        self.start_bin = os.path.abspath(args.old_bin) if args.old_bin else self.bin
        self.node_bin = {}  # (role, id) -> build directory, when not start_bin
        self.env = dict(os.environ, RINGCACHE_BIN=self.start_bin)
        self.script = os.path.join(ROOT, "deploy", "cluster.sh")
        self.ctl_bin = os.path.join(self.bin, "tools", "ctl", "ringcachectl")
        self.admin = f"127.0.0.1:{base + 10}"
        self.nbd_port = base + 9  # gateway 1's
        self.etcd_endpoint = f"127.0.0.1:{base - 1}"  # where cluster.sh --etcd puts it
        self.tls = os.path.join(self.dir, "tls") if args.tls else None  # cluster.sh up --tls
        self.is_up = False
        self.paused = set()  # pids stopped with SIGSTOP (continued before any teardown)

    # The ports of gateway g (cluster.sh's scheme: gateway 1 at P+9/P+10/P+11, gateway i >= 2
    # at P+500+i / P+600+i / P+700+i).
    def gateway_ports(self, g):
        b = self.base
        return (b + 9, b + 10, b + 11) if g == 1 else (b + 500 + g, b + 600 + g, b + 700 + g)

    def leader(self):
        """The id of the elected coordinator (P/coordinator in etcd), or None."""
        try:
            r = self.etcdctl("get", "-w", "json", f"{ETCD_PREFIX}/coordinator")
            kvs = json.loads(r.stdout).get("kvs") if r.returncode == 0 else None
            return record_id(base64.b64decode(kvs[0]["value"])) if kvs else None
        except (ValueError, KeyError, TypeError, IndexError, subprocess.TimeoutExpired):
            return None

    def sh(self, *argv, timeout=180, bin_dir=None):
        env = dict(self.env, RINGCACHE_BIN=bin_dir) if bin_dir else self.env
        return subprocess.run(["bash", self.script, *argv, "--dir", self.dir], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)

    def bin_of(self, role, node_id):
        return self.node_bin.get((role, node_id), self.start_bin)

    def write_cluster_file(self):
        """Cluster mode: the cluster file of cluster.sh's port scheme plus etcd and the lease
        TTL (cluster.sh takes a DIR/cluster.yaml that exists instead of writing its own)."""
        a, b = self.args, self.base
        lines = ["# ringcache cluster file (written by tests/fault/fault_test.py: the port "
                 "scheme of deploy/cluster.sh, cluster mode, a short lease)",
                 f"cluster_id: fault-{os.getpid()}",
                 f"data_dir: {self.dir}/state",
                 f"replication: {min(a.data_nodes, 3)}",
                 "block_size: 4096",
                 f"etcd_endpoints: {self.etcd_endpoint}",
                 f"etcd_prefix: {ETCD_PREFIX}",
                 f"etcd_lease_ttl_s: {a.lease_ttl}",
                 *([f"placement: {a.placement}"] if a.placement else []),
                 "nodes:"]
        for i in range(1, a.data_nodes + 1):
            lines.append(f"  - {{role: datanode, id: {i}, listen: 127.0.0.1:{b + 100 + i}, "
                         f"http_listen: 127.0.0.1:{b + 200 + i}}}")
        for i in range(1, a.cache_nodes + 1):
            lines.append(f"  - {{role: cachenode, id: {i}, listen: 127.0.0.1:{b + 300 + i}, "
                         f"http_listen: 127.0.0.1:{b + 400 + i}, ssd_bytes: {a.ssd_size}, "
                         f"ram_bytes: {a.ram_size}}}")
        for g in range(1, a.gateways + 1):
            nbd_port, admin, http = self.gateway_ports(g)
            lines.append(f"  - {{role: gateway, id: {g}, nbd_listen: 127.0.0.1:{nbd_port}, "
                         f"admin_listen: 127.0.0.1:{admin}, http_listen: 127.0.0.1:{http}}}")
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "cluster.yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def up(self):
        a = self.args
        self.is_up = True
        extra = []
        if a.etcd:
            self.write_cluster_file()
            extra = ["--etcd", "--gateways", str(a.gateways)]
        if a.tls:
            extra.append("--tls")
        if a.deck is not None and DISK_SEAMS.intersection(a.deck):
            extra.append("--fault-seams")
        r = self.sh("up", "--base-port", str(self.base), "--cache-nodes", str(a.cache_nodes),
                    "--data-nodes", str(a.data_nodes), "--ssd-size", a.ssd_size, "--ram-size",
                    a.ram_size, *extra)
        if r.returncode != 0:
            raise SetupError(f"cluster.sh up failed:\n{r.stdout}{r.stderr}")

    def kill(self, role, ids):
        r = self.sh("kill", role, *map(str, ids))
        if r.returncode != 0:
            raise SetupError(f"cluster.sh kill {role} {ids} failed: {r.stdout}{r.stderr}")

    # What bash or the loader says when a binary cannot be run because a build is replacing it.
    RELINKING = re.compile(r"cluster\.sh: line \d+: \S+: (Permission denied|Text file busy|"
                           r"No such file or directory|cannot execute)|"
                           r"error while loading shared libraries")

    def stop(self, role, ids):
        """SIGTERM, as a service manager stops a daemon; waits until they are gone."""
        r = self.sh("stop", role, *map(str, ids))
        if r.returncode != 0:
            raise DaemonError(f"cluster.sh stop {role} {ids} failed: {r.stdout}{r.stderr}")

    def start(self, role, ids):
        deadline = time.monotonic() + 180
        bins = {self.bin_of(role, i) for i in ids}
        if len(bins) != 1:
            raise SetupError(f"start {role} {ids}: the daemons run from different builds")
        bin_dir = bins.pop()
        while True:
            r = self.sh("start", role, *map(str, ids), bin_dir=bin_dir)
            if r.returncode == 0:
                return
            # A binary that a concurrent build is relinking cannot be executed for a moment: no
            # daemon failure; wait until it is whole (executable, unchanged for 3 s) and retry.
            if not self.RELINKING.search(r.stdout + r.stderr) or time.monotonic() > deadline:
                raise DaemonError(f"cluster.sh start {role} {ids} failed: {r.stdout}{r.stderr}")
            path = os.path.join(self.bin_of(role, ids[0]), role, f"ringcache-{role}")
            self.log(f"cluster.sh start {role} {ids}: {path} could not be executed (being "
                     f"rebuilt?); retrying once it is whole")
            while time.monotonic() < deadline:
                try:
                    if (os.access(path, os.X_OK)
                            and time.time() - os.stat(path).st_mtime > 3):
                        break
                except OSError:
                    pass
                time.sleep(1)

    def pid(self, role, node_id):
        with open(os.path.join(self.dir, "pids", f"{role}-{node_id}.pid")) as f:
            return int(f.read().strip())

    def ready(self, role, node_id):
        """The ports a daemon bound, from the ready file cluster.sh had it write."""
        with open(os.path.join(self.dir, "ready", f"{role}-{node_id}.json")) as f:
            return json.load(f)

    def stop_process(self, role, node_id):
        pid = self.pid(role, node_id)
        os.kill(pid, signal.SIGSTOP)
        self.paused.add(pid)
        return pid

    def continue_process(self, pid):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.paused.discard(pid)

    def members(self):
        """[(role, id)] of the cluster file's nodes and those `cluster.sh add` started, as
        cluster.sh lists them (one flow mapping per line of the cluster file)."""
        out = []
        with open(os.path.join(self.dir, "cluster.yaml")) as f:
            for line in f:
                m = MEMBER_RE.match(line)
                if m:
                    out.append((m.group(1), int(m.group(2))))
        try:
            with open(os.path.join(self.dir, "added_nodes")) as f:
                out += [(r, int(i)) for r, i in (line.split() for line in f if line.strip())]
        except FileNotFoundError:
            pass
        return out

    def alive(self, role, node_id):
        """cluster.sh's test: the pid file names a process that exists and is not a zombie."""
        try:
            with open(f"/proc/{self.pid(role, node_id)}/stat") as f:
                stat = f.read()
        except (OSError, ValueError):
            return False
        return stat[stat.rfind(")") + 2:][:1] not in ("", "Z")

    def down_members(self):
        """Returns [(role, id)] of the daemons that are not running (role 'etcd', id 0, for
        etcd; only in cluster mode). Asked after every fault: read here, not with a `cluster.sh
        status` (tens of processes each time)."""
        out = [(r, i) for r, i in self.members() if not self.alive(r, i)]
        if os.path.exists(os.path.join(self.dir, "pids", "etcd-0.pid")) and \
                not self.alive("etcd", 0):
            out.append(("etcd", 0))
        return out

    def down(self):
        for pid in list(self.paused):
            self.continue_process(pid)
        if self.is_up:
            self.sh("down", timeout=120)
            self.is_up = False

    def open_nbd(self, vdi, gateway=1):
        """Returns a libnbd handle connected to VDI on gateway `gateway`: plaintext, or with
        --tls STARTTLS required and the cluster's client certificate (DIR/tls/client)."""
        h = nbd.NBD()
        port = self.gateway_ports(gateway)[0]
        if self.tls:
            h.set_tls(nbd.TLS_REQUIRE)
            h.set_tls_certificates(os.path.join(self.tls, "client"))
            h.connect_uri(f"nbds://127.0.0.1:{port}/{vdi}")
        else:
            h.connect_uri(f"nbd://127.0.0.1:{port}/{vdi}")
        return h

    def ctl(self, *argv, timeout=120, gateway=None):
        """ringcachectl against `gateway`, by default the coordinator: gateway 1, or with several
        gateways the one elected (gateway 1 while none is)."""
        sec = ["--tls-dir", os.path.join(self.tls, "admin")] if self.tls else []
        admin = self.admin
        if gateway is not None:
            admin = f"127.0.0.1:{self.gateway_ports(gateway)[1]}"
        elif self.args.gateways > 1:
            admin = f"127.0.0.1:{self.gateway_ports(self.leader() or 1)[1]}"
        return subprocess.run([self.ctl_bin, "--gateway", admin, *sec, *argv],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)

    def cache_states(self):
        """Returns {cache node id: state} from `ringcachectl node list`, or {} on error."""
        try:
            r = self.ctl("--json", "node", "list", timeout=30)
            nodes = json.loads(r.stdout)
        except (subprocess.TimeoutExpired, ValueError):
            return {}
        nodes = nodes["nodes"] if isinstance(nodes, dict) else nodes
        return {int(n["id"]): n.get("state", "") for n in nodes if n.get("role") == "cachenode"}

    def etcdctl(self, *argv):
        endpoint, sec = self.etcd_endpoint, []
        if self.tls:
            a = os.path.join(self.tls, "admin")
            endpoint = "https://" + endpoint
            sec = ["--cacert", os.path.join(a, "ca-cert.pem"), "--cert",
                   os.path.join(a, "cert.pem"), "--key", os.path.join(a, "key.pem")]
        return subprocess.run(["etcdctl", "--endpoints", endpoint,
                               "--command-timeout=5s", *sec, *argv],
                              env=dict(os.environ, ETCDCTL_API="3"), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30)

    def log_path(self, role, node_id):
        return os.path.join(self.dir, "logs", f"{role}-{node_id}.log")

    def node_dir(self, role, node_id):
        """The daemon's directory (cluster.sh: data_dir/ROLE-ID): SSD file, state, RocksDB."""
        return os.path.join(self.dir, "state", f"{role}-{node_id}")

    def tail(self, role, node_id, n=15):
        try:
            with open(self.log_path(role, node_id), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)\n"

    def metric_sum(self, role, name):
        """Sums metric `name` over every daemon of `role` that answers (their /metrics)."""
        count, offset = ((self.args.data_nodes, 200) if role == "datanode"
                         else (self.args.cache_nodes, 400))
        total, answered = 0.0, 0
        scheme, context = "http", None
        if self.tls:  # /metrics over HTTPS, client certificate required (cluster.sh's web.yml)
            a = os.path.join(self.tls, "admin")
            scheme = "https"
            context = ssl.create_default_context(cafile=os.path.join(a, "ca-cert.pem"))
            context.load_cert_chain(os.path.join(a, "cert.pem"), os.path.join(a, "key.pem"))
        for i in range(1, count + 1):
            try:
                with urllib.request.urlopen(
                        f"{scheme}://127.0.0.1:{self.base + offset + i}/metrics", timeout=5,
                        context=context) as r:
                    text = r.read().decode(errors="replace")
            except OSError:
                continue
            answered += 1
            for line in text.splitlines():
                if line.startswith(name) and (len(line) == len(name) or line[len(name)] in " {"):
                    try:
                        total += float(line.split()[-1])
                    except ValueError:
                        pass
        return int(total), answered

    def sanitizer_reports(self):
        """Returns (log name, line) for every sanitizer report in the daemon logs."""
        found = []
        logs = os.path.join(self.dir, "logs")
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            with open(os.path.join(logs, name), errors="replace") as f:
                for line in f:
                    if ("ERROR: AddressSanitizer" in line or "ERROR: LeakSanitizer" in line
                            or "runtime error:" in line):
                        found.append((name, line.strip()))
        return found


class GatewayLog:
    """The gateways' logs, searched from a mark (one offset per log; the logs only grow:
    cluster.sh appends). With several gateways the coordinator's work shows in whichever log
    belongs to the leader of the moment, so every search covers all of them."""

    def __init__(self, paths):
        self.paths = paths

    def mark(self):
        marks = []
        for path in self.paths:
            try:
                marks.append(os.path.getsize(path))
            except OSError:
                marks.append(0)
        return tuple(marks)

    def read_each(self, since):
        out = []
        for path, offset in zip(self.paths, since):
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    out.append(f.read())
            except OSError:
                out.append(b"")
        return out

    def find(self, text, since):
        return any(text.encode() in part for part in self.read_each(since))

    def which(self, text, since):
        """The 1-based number of the first gateway whose log holds text after since, or None."""
        for i, part in enumerate(self.read_each(since)):
            if text.encode() in part:
                return i + 1
        return None

    def count(self, text, since):
        return sum(part.count(text.encode()) for part in self.read_each(since))


class SetupError(Exception):
    pass


class DaemonError(Exception):
    pass


PORT_SLOTS = "/tmp/ringcache-port-slots"
_port_slot_lock = None  # the open, flock'ed file of this run's port slot: held until exit


def pick_base_port(requested, etcd):
    """Returns `requested` when given, else the base port of a port slot this process takes
    for its lifetime: the slots of tests/e2e/ports.sh (P = 20010 + 1000 k, k in 0..11, ports
    P-2..P+709, never overlapping), each taken by an exclusive flock on PORT_SLOTS/k.lock, so
    that tests running side by side never pick overlapping ports. The slot's cluster ports (and
    etcd's, P-2 and P-1) must also be free on 127.0.0.1."""
    global _port_slot_lock
    if requested:
        return requested
    offsets = [9, 10, 11] + [o + i for o in (100, 200, 300, 400) for i in range(1, 10)]
    offsets += [o + g for o in (500, 600, 700) for g in range(2, 10)]  # gateways 2..9
    if etcd:
        offsets += [-2, -1]
    os.makedirs(PORT_SLOTS, exist_ok=True)
    slots = list(range(12))
    random.SystemRandom().shuffle(slots)
    for k in slots:
        f = open(os.path.join(PORT_SLOTS, f"{k}.lock"), "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        base = 20010 + 1000 * k
        try:
            for off in offsets:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + off))
        except OSError:
            f.close()
            continue
        _port_slot_lock = f
        return base
    raise SetupError(f"every port slot is taken or busy ({PORT_SLOTS})")


# --------------------------------------------------------------------------------------------
# What the checker knows about each VDI.

class VdiState:
    """Per-block record of one VDI. Each block belongs to one writer, the only thread that
    changes its entries while the writers run; the main thread reads them after join()."""

    def __init__(self, name, tag, replication, size):
        self.name, self.tag, self.replication = name, tag, replication
        self.nblocks = size // BLOCK
        self.next_version = [0] * self.nblocks   # versions sent so far (0: never written)
        self.last_acked = [0] * self.nblocks     # 0: no write acknowledged yet
        self.acked_at = [0.0] * self.nblocks     # log time of the last acknowledgement
        self.unacked = {}                        # block -> [versions answered by an error]
        self.history = {}                        # block -> last HISTORY (version, ack time)
        self.abandoned = set()                   # blocks of client-side timeouts: never rewritten

    HISTORY = 6

    def acks(self, b):
        """The last acknowledgements of block b, as text: v3@12.5s v4@13.0s ..."""
        return " ".join(f"v{v}@{t:.1f}s" for v, t in self.history.get(b, ())) or "none"

    def expected(self, b):
        la = self.last_acked[b]
        later = [v for v in self.unacked.get(b, ()) if v > la]
        text = f"v{la}" if la else "zeros"
        return text + (f" or unacked {','.join(f'v{v}' for v in later)}" if later else "")

    def judge(self, seed, b, data):
        """Returns None when block b's data is allowed, else (category, what was found) with
        category "lost" (the acknowledged data is missing or damaged) or "stale" (an older
        version than the newest acknowledged one, or one that was never written)."""
        la = self.last_acked[b]
        if data == ZERO_BLOCK:
            return None if la == 0 else ("lost", "zeros")
        magic, tag, blk, ver, s = HEADER.unpack_from(data)
        if magic != MAGIC or s != seed:
            return ("lost", "garbage")
        if tag != self.tag or blk != b:
            return ("lost", f"the data of VDI {tag} block {blk} v{ver}")
        if data != block_data(seed, tag, blk, ver):
            return ("lost", f"corrupt v{ver}")
        if self.next_version[b] == 0:
            return ("stale", f"v{ver} of a block never written")
        if ver > self.next_version[b] or ver == 0:
            return ("stale", f"v{ver}, never written (last sent v{self.next_version[b]})")
        unacked = self.unacked.get(b, ())
        if ver == la or (ver > la and ver in unacked):
            return None
        if ver < la:
            return ("stale", f"older v{ver} ({'unacknowledged' if ver in unacked else 'acknowledged'})")
        return ("stale", f"v{ver}, neither acknowledged nor failed yet, read while not in flight")


def make_chunks(state, writers):
    """Splits the VDI into ownership chunks of CHUNK blocks, shifted by CHUNK/2 so that every
    object boundary lies inside one chunk; returns per writer its chunks and boundary chunks as
    (first block, end block, boundary block or 0)."""
    owned = [[] for _ in range(writers)]
    half = CHUNK // 2
    i = 0
    while True:
        first = max(0, i * CHUNK - half)
        end = min(state.nblocks, i * CHUNK + half)
        if first >= state.nblocks:
            break
        inside = 0 < i * CHUNK < state.nblocks
        boundary = i * CHUNK if inside and (i * CHUNK) % BLOCKS_PER_OBJECT == 0 else 0
        owner = (i * CHUNK // BLOCKS_PER_OBJECT) % writers if boundary else i % writers
        owned[owner].append((first, end, boundary))
        i += 1
    return owned


# --------------------------------------------------------------------------------------------
# Writers.

class Op:
    __slots__ = ("kind", "first", "versions", "buf", "t", "sweep")

    def __init__(self, kind, first, versions, buf, sweep=False):
        self.kind, self.first, self.versions, self.buf = kind, first, versions, buf
        self.t = time.monotonic()
        self.sweep = sweep

    @property
    def count(self):
        return len(self.versions)


class Writer(threading.Thread):
    """One NBD connection writing and reading its own chunks of one VDI."""

    P_READ, P_MULTI, P_BOUNDARY, P_HOT = 0.10, 0.15, 0.35, 0.6
    P_SWEEP = 0.5  # while a sweep is pending, the share of requests that are sweep reads

    def __init__(self, ctx, state, index, chunks, seed):
        super().__init__(name=f"writer-{state.name}-{index}", daemon=True)
        self.ctx, self.state, self.index = ctx, state, index
        self.chunks = chunks
        self.boundaries = [c for c in chunks if c[2]]
        self.rng = random.Random(seed)
        # A hot tenth of the chunks gets most writes, so blocks see many versions.
        self.hot = self.rng.sample(chunks, max(1, len(chunks) // 10))
        self.busy = set()
        self.retry = collections.deque()  # (not before, first block, count) of failed writes
        self.sweep = collections.deque()  # (first block, count) still to read back
        self.sweep_seen = ctx.sweep_gen
        self.acked = self.failed = self.abandoned = self.reads = self.read_errors = 0
        self.sweep_reads = 0
        self.reconnects = 0
        self.stall_max = 0.0
        self.free_bufs = {}  # size -> bytearrays to reuse (see take_buf)
        self.last_ack = None  # monotonic time of the last acknowledged write
        # --max-iops: this writer's share, as the time between two requests it issues
        self.interval = ctx.args.writers / ctx.args.max_iops if ctx.args.max_iops else 0.0
        self.next_issue = 0.0  # monotonic time before which no new request is issued
        self.ack_gap_max = 0.0  # the longest time between two acknowledged writes

    # Debian 12's libnbd (1.14) Python binding keeps a reference to the buffer of every
    # aio_pread / aio_pwrite for good: a new buffer per request grew a 60-fault run's checker
    # to 10 GiB (the OOM killer ended it). Requests therefore reuse their bytearrays, wrapped
    # with nbd.Buffer.from_buffer (the kept reference then pins one that is used again).
    def take_buf(self, size):
        free = self.free_bufs.get(size)
        return nbd.Buffer.from_buffer(free.pop() if free else bytearray(size))

    def give_buf(self, buf):
        ba = buf.to_buffer()
        self.free_bufs.setdefault(len(ba), []).append(ba)

    def write_op(self, a, n):
        """Returns a write of blocks [a, a+n), each at its next version, or None if one of them
        is busy or abandoned."""
        st, versions, parts = self.state, [], []
        blocks = range(a, a + n)
        if any(b in self.busy or b in st.abandoned for b in blocks):
            return None
        buf = self.take_buf(n * BLOCK)
        data = buf.to_buffer()
        for i, b in enumerate(blocks):
            st.next_version[b] += 1
            versions.append(st.next_version[b])
            data[i * BLOCK:(i + 1) * BLOCK] = block_data(self.ctx.seed, st.tag, b,
                                                         st.next_version[b])
        return Op("write", a, versions, buf)

    def plan_sweep(self):
        """Queues read-backs of the hot chunks and of --sweep-share of the other chunks, of
        those holding a written block."""
        share = self.ctx.args.sweep_share
        if share <= 0:
            return
        hot = set(self.hot)
        self.sweep.clear()
        for chunk in self.chunks:
            first, end, _ = chunk
            if chunk not in hot and self.rng.random() >= share:
                continue
            if any(self.state.next_version[b] for b in range(first, end)):
                self.sweep.append((first, end - first))

    def sweep_op(self):
        for _ in range(len(self.sweep)):
            a, n = self.sweep.popleft()
            if any(b in self.busy for b in range(a, a + n)):
                self.sweep.append((a, n))  # later
                continue
            return Op("read", a, [0] * n, self.take_buf(n * BLOCK), sweep=True)
        return None

    # REQUIRES: the blocks of the result are not busy and (for writes) not abandoned.
    def next_op(self):
        if self.ctx.sweep_gen != self.sweep_seen:
            self.sweep_seen = self.ctx.sweep_gen
            self.plan_sweep()
        if self.sweep and self.rng.random() < self.P_SWEEP:
            op = self.sweep_op()
            if op is not None:
                return op
        if self.retry and self.retry[0][0] <= time.monotonic():
            _, a, n = self.retry.popleft()
            op = self.write_op(a, n)
            if op is not None:
                return op
            if not any(b in self.state.abandoned for b in range(a, a + n)):
                self.retry.append((time.monotonic() + 0.5, a, n))  # busy: later
        for _ in range(8):
            r = self.rng.random()
            chunk = self.rng.choice(self.hot if self.rng.random() < self.P_HOT else self.chunks)
            first, end, boundary = chunk
            if r < self.P_READ:
                a = self.rng.randrange(first, end)
                n = self.rng.randint(1, end - a)
                blocks = range(a, a + n)
                if any(b in self.busy for b in blocks):
                    continue
                return Op("read", a, [0] * n, self.take_buf(n * BLOCK))
            if r < self.P_READ + self.P_MULTI:
                if self.boundaries and self.rng.random() < self.P_BOUNDARY:
                    first, end, boundary = self.rng.choice(self.boundaries)
                    a = self.rng.randrange(first, boundary)
                    n = self.rng.randint(boundary + 1, end) - a
                else:
                    a = self.rng.randrange(first, end - 1) if end - first > 1 else first
                    n = self.rng.randint(min(2, end - a), end - a)
            else:
                a, n = self.rng.randrange(first, end), 1
            op = self.write_op(a, n)
            if op is not None:
                return op
        return None

    def connect(self):
        """Connects to this writer's gateway (writer i: gateway i mod G + 1); when it does not
        answer (killed by a nemesis), to the next one, as a client of a dead host would move."""
        gateways = self.ctx.args.gateways
        home = self.index % gateways + 1
        deadline = time.monotonic() + 60
        attempt = 0
        while True:
            g = (home - 1 + attempt) % gateways + 1
            try:
                h = self.ctx.cluster.open_nbd(self.state.name, g)
                if g != home:
                    self.ctx.log(f"{self.name}: gateway {home} does not answer; connected to "
                                 f"gateway {g}")
                return h
            except nbd.Error as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cannot connect to gateway {g}: {e}") from e
                attempt += 1
                if attempt % gateways == 0:
                    time.sleep(0.5)

    def issue(self, h, op):
        for b in range(op.first, op.first + op.count):
            self.busy.add(b)
        if op.kind == "write":
            return h.aio_pwrite(op.buf, op.first * BLOCK)
        return h.aio_pread(op.buf, op.first * BLOCK)

    def finish(self, op, ok, abandoned=False):
        """Records the outcome of op: ok means the server acknowledged it; abandoned means the
        client gave up on it (timeout or broken connection) and the server may still apply it."""
        self.record(op, ok, abandoned)
        if not abandoned:  # (an abandoned request's buffer may still be in libnbd's hands)
            self.give_buf(op.buf)

    def record(self, op, ok, abandoned):
        st = self.state
        blocks = range(op.first, op.first + op.count)
        for b in blocks:
            self.busy.discard(b)
        took = time.monotonic() - op.t
        self.stall_max = max(self.stall_max, took)
        if took > 30:
            self.ctx.slow_request(f"{self.name}: {op.kind} of blocks {op.first}+{op.count} took "
                                  f"{took:.1f}s ({'ok' if ok else 'error'}, issued at "
                                  f"{self.ctx.log.now() - took:.1f}s)")
        if op.kind == "read":
            if not ok:
                self.read_errors += 1
                return
            self.reads += 1
            self.sweep_reads += op.sweep
            data = op.buf.to_bytearray()
            issued = self.ctx.log.now() - took
            for i, b in enumerate(blocks):
                found = st.judge(self.ctx.seed, b, bytes(data[i * BLOCK:(i + 1) * BLOCK]))
                if found is not None:
                    self.ctx.record_bad(
                        st, b, found[0], found[1],
                        f"{'sweep ' if op.sweep else ''}read issued at {issued:.1f}s "
                        f"(answered after {took:.1f}s) during {self.ctx.active_at(issued)}",
                        issued)
            return
        if ok:
            self.acked += 1
            t = time.monotonic()
            if self.last_ack is not None:
                self.ack_gap_max = max(self.ack_gap_max, t - self.last_ack)
            self.last_ack = t
            now = self.ctx.log.now()
            for b, v in zip(blocks, op.versions):
                st.last_acked[b] = v
                st.acked_at[b] = now
                h = st.history.setdefault(b, [])
                h.append((v, now))
                if len(h) > st.HISTORY:
                    del h[0]
            return
        self.failed += 1
        self.abandoned += abandoned
        for b, v in zip(blocks, op.versions):
            st.unacked.setdefault(b, []).append(v)
            if abandoned:
                st.abandoned.add(b)
        if not abandoned:  # the same blocks again, with new versions, a little later
            self.retry.append((time.monotonic() + 0.5, op.first, op.count))

    def run(self):
        self.inflight = {}
        try:
            self.loop()
        except Exception:  # noqa: BLE001 - any bug here must fail the test, with its trace
            self.ctx.problem(f"{self.name} crashed:\n{traceback.format_exc()}")
            for op in self.inflight.values():
                self.finish(op, False, abandoned=True)

    def loop(self):
        ctx = self.ctx
        h = self.connect()
        inflight = self.inflight
        # Requests lost with a broken connection (its gateway killed, say), not answered: sent
        # again once reconnected, with the same data and versions, as QEMU's NBD client does
        # after a reconnect (reconnect-delay). A timed-out request is abandoned instead: the
        # server may still apply it.
        resend = []
        while True:
            stopping = ctx.stop_writers.is_set()
            if stopping and not inflight:
                break
            broken = False
            while not stopping and len(inflight) < ctx.args.depth:
                if self.interval and time.monotonic() < self.next_issue:
                    break  # --max-iops: this writer's next request is not due yet
                op = self.next_op()
                if op is None:
                    break
                if self.interval:
                    # no credit for idle time beyond one request: the cap holds after a stall
                    self.next_issue = max(self.next_issue, time.monotonic() - self.interval) \
                        + self.interval
                try:
                    inflight[self.issue(h, op)] = op
                except nbd.Error:
                    resend.append(op)  # never sent: the connection is gone
                    broken = True
                    break
            if not inflight and not broken:
                time.sleep(0.01)
                continue
            if not broken:
                wait_ms = 200
                if self.interval:  # wake up for the next request that is due
                    wait_ms = min(wait_ms, max(1, int((self.next_issue - time.monotonic()) * 1000)))
                try:
                    h.poll(wait_ms)
                except nbd.Error:
                    broken = True
            for cookie in list(inflight):
                try:
                    if not h.aio_command_completed(cookie):
                        continue
                    self.finish(inflight.pop(cookie), True)
                except nbd.Error:
                    op = inflight.pop(cookie)
                    if h.aio_is_dead() or h.aio_is_closed():
                        resend.append(op)  # failed with the connection, not by an answer
                    else:
                        self.finish(op, False)
            now = time.monotonic()
            timed_out = any(now - op.t > ctx.args.io_timeout for op in inflight.values())
            if broken or timed_out or h.aio_is_dead() or h.aio_is_closed():
                if timed_out:
                    resend.extend(inflight.values())
                    for op in resend:
                        self.finish(op, False, abandoned=True)
                    resend = []
                else:
                    resend.extend(inflight.values())
                inflight.clear()
                self.reconnects += 1
                ctx.log(f"{self.name}: connection reset ({'timeout' if timed_out else 'error'})"
                        + (f"; {len(resend)} requests to send again" if resend else ""))
                del h
                h = self.connect()
                for op in resend:
                    try:
                        inflight[self.issue(h, op)] = op
                    except nbd.Error:
                        self.finish(op, False, abandoned=True)
                resend = []
        try:
            h.shutdown()
        except nbd.Error:
            pass


# --------------------------------------------------------------------------------------------
# The test.

class Context:
    def __init__(self, args, seed, cluster, log):
        self.args, self.seed, self.cluster, self.log = args, seed, cluster, log
        self.gwlog = GatewayLog([cluster.log_path("gateway", g)
                                 for g in range(1, args.gateways + 1)])
        self.stop_writers = threading.Event()
        self.abort = threading.Event()
        self.mu = threading.Lock()
        self.problems = []          # reasons to fail other than lost or stale blocks
        self.bad = {}  # (vdi, block) -> {category: (expected, found, label, acked_at, acks, failed)}
        self.bad_reads = collections.Counter()  # category -> reads that found it
        self.faults = []            # (start, end, phase, kind, description), log times
        self.kinds = collections.Counter()      # nemesis kind -> faults injected
        self.activity = []          # (start, end or None, description) of every fault step
        self.current = ""           # "fault N [kind]" while a fault runs
        self.acked = self.failed = self.abandoned = self.reads = self.sweep_reads = 0
        self.longest = 0.0          # seconds, the slowest request of any writer
        self.ack_gap = 0.0          # seconds, the longest gap between a writer's acknowledgements
        self.slow = 0               # requests that took over 30 s
        self.removed = set()        # cache nodes removed for good (static mode's remove)
        self.sweep_gen = 0          # bumped when a cache node came back: writers read back
        self.takeovers = []         # seconds from a coordinator's kill -9 to the next election
        self.etcd_backup = None     # the backup lose-etcd restores from (ringcachectl backup)
        self.etcd_backups = 0

    def problem(self, msg):
        with self.mu:
            self.problems.append(msg)
        self.log(f"PROBLEM: {msg}")
        self.abort.set()

    def slow_request(self, msg):
        """Counts a request that took over 30 s; logs the first few."""
        with self.mu:
            self.slow += 1
            first = self.slow <= 8
        if first:
            self.log(msg)

    def record_bad(self, st, b, category, found, label, t_read=None):
        """Notes a bad read of block b issued at log time t_read (default now); the first
        finding per block and category is kept."""
        if t_read is None:
            t_read = self.log.now()
        with self.mu:
            self.bad_reads[category] += 1
            per = self.bad.setdefault((st.name, b), {})
            if category in per:
                return
            per[category] = (st.expected(b), found, label, st.acked_at[b] if st.last_acked[b]
                             else None, st.acks(b), sorted(st.unacked.get(b, ())), t_read)
            n = sum(1 for v in self.bad.values() if category in v)
        if n <= 5:
            self.log(f"{category.upper()}: {st.name} block {b} (object {b // BLOCKS_PER_OBJECT}): "
                     f"expected {st.expected(b)}, found {found} [{label}]")

    def count(self, category):
        with self.mu:
            return sum(1 for v in self.bad.values() if category in v)

    def begin(self, what):
        """Notes the start of a fault step (closing the previous one); reads are labelled with
        the step they overlapped."""
        now = self.log.now()
        with self.mu:
            if self.activity and self.activity[-1][1] is None:
                s, _, d = self.activity[-1]
                self.activity[-1] = (s, now, d)
            if what:
                self.activity.append((now, None, f"{self.current}: {what}"))

    def active_at(self, t):
        """What the faults were doing at log time t."""
        with self.mu:
            for s, e, d in reversed(self.activity):
                if s <= t and (e is None or t <= e):
                    return d
                if e is not None and e < t:
                    break
            for i in range(len(self.faults) - 1, -1, -1):
                _, end, _, kind, _ = self.faults[i]
                if end <= t:
                    return f"no fault ({t - end:.1f}s after fault {i + 1} [{kind}])"
        return "no fault"

    def faults_between(self, t0, t1):
        """Faults that overlap log times [t0, t1], as "N [kind] S-Es" texts."""
        return [f"{i + 1} [{kind}] {s:.1f}-{e:.1f}s"
                for i, (s, e, _, kind, _) in enumerate(self.faults) if e >= t0 and s <= t1]

    def sleep(self, seconds):
        """Sleeps unless the test is aborting; returns False when it is."""
        return not self.abort.wait(seconds)


# --------------------------------------------------------------------------------------------
# Nemeses.

class Nemesis:
    """Chooses and injects the faults. Cluster mode waits, after every fault that takes a cache
    node away, until the gateway logged its rejoin, so that every fault starts from a whole ring."""

    def __init__(self, ctx, rng):
        self.ctx, self.rng = ctx, rng
        self.c, self.a = ctx.cluster, ctx.args
        self.deck = []

    def log(self, msg):
        self.ctx.log(msg)

    def choose(self, max_data):
        a = self.a
        caches = [i for i in range(1, a.cache_nodes + 1) if i not in self.ctx.removed]
        if a.deck is None:  # static mode's coin, as before --nemeses existed
            removable = a.remove_cache_node and len(caches) > 1
            if self.rng.random() < a.cache_fault_share and (not a.remove_cache_node or removable):
                return "remove" if a.remove_cache_node else "kill-cache"
            return "kill-data" if max_data >= 1 else "kill-cache"
        for _ in range(2 * len(a.deck) + 2):
            if not self.deck:
                self.deck = list(a.deck)
                self.rng.shuffle(self.deck)
            kind = self.deck.pop()
            if kind in ("kill-data", "data-during-join", "wipe-data", "lose-data",
                        "rot-data", "slow-data", "full-data") and max_data < 1:
                continue
            if kind == "remove" and not a.etcd and len(caches) <= 1:
                continue
            return kind
        return "kill-data" if max_data >= 1 else "kill-cache"

    def inject(self, phase, max_data):
        kind = self.choose(max_data)
        caches = [i for i in range(1, self.a.cache_nodes + 1) if i not in self.ctx.removed]
        node = self.rng.choice(caches)
        data = sorted(self.rng.sample(range(1, self.a.data_nodes + 1),
                                      self.rng.randint(1, max(1, max_data))))
        down = self.rng.uniform(0.2, self.a.max_down)
        t = self.ctx.log.now()
        start = time.monotonic()
        self.ctx.current = f"fault {len(self.ctx.faults) + 1} [{kind}]"
        try:
            what = getattr(self, kind.replace("-", "_"))(node, data, down)
        finally:
            self.ctx.begin(None)
        if what is None:  # aborted; the problem is recorded
            return
        self.ctx.kinds[kind] += 1
        with self.ctx.mu:
            self.ctx.faults.append((t, self.ctx.log.now(), phase, kind, what))
        self.log(f"fault {len(self.ctx.faults)} [{kind}] at {t:.1f}s: {what}; "
                 f"{time.monotonic() - start:.1f}s in all")

    # --- steps shared by the nemeses

    def step(self, what):
        self.ctx.begin(what)

    def wait_log(self, text, since, what, timeout=None, poll=0.05, quiet=False):
        """Waits until the gateway's log holds `text` after offset `since`; returns the seconds
        it took, or None (a problem is recorded unless `quiet`) on timeout or abort."""
        timeout = timeout or self.a.settle_timeout
        start = time.monotonic()
        while not self.ctx.gwlog.find(text, since):
            if time.monotonic() - start > timeout:
                if quiet:
                    return None
                tails = "".join(f"gateway {g} log tail:\n{self.c.tail('gateway', g, 25)}"
                                for g in range(1, self.a.gateways + 1))
                self.ctx.problem(f"timed out after {timeout:.0f}s waiting for {what} (gateway "
                                 f"log: '{text}');\n{tails}")
                return None
            if not self.ctx.sleep(poll):
                return None
        return time.monotonic() - start

    def wait_rebalance_done(self, since, what):
        """Waits for 'data rebalance: done' after `since`, for as long as the rebalance keeps
        moving: each new stage it logs ('copying', 'switching', 'deleting') gives it another
        settle_timeout. A rebalance that copies tens of thousands of blocks on a loaded machine
        took over three minutes (CI); one that stops logging for settle_timeout is a problem."""
        start = time.monotonic()
        stage_mark = since
        while True:
            took = self.wait_log("data rebalance: done", since, what, timeout=self.a.settle_timeout,
                                 quiet=True)
            if took is not None:
                return time.monotonic() - start
            if self.ctx.abort.is_set() or not self.ctx.gwlog.find("data rebalance: ", stage_mark):
                # No new stage since the last wait: stuck. Record it as wait_log does.
                return self.wait_log("data rebalance: done", since, what, timeout=0.01)
            stage_mark = self.ctx.gwlog.mark()

    def kill_now(self, role, ids):
        """kill -9 at once (no shell in between), then cluster.sh kill waits until they are
        gone."""
        for i in ids:
            try:
                os.kill(self.c.pid(role, i), signal.SIGKILL)
            except (OSError, ValueError):
                pass  # cluster.sh kill below reports a daemon it cannot kill
        self.c.kill(role, ids)

    def kill_cache_node(self, node):
        since = self.ctx.gwlog.mark()
        self.step(f"kill -9 cachenode {node}")
        self.c.kill("cachenode", [node])
        return since

    def restart_cache_node(self, node, label="restart"):
        self.step(f"{label} cachenode {node}")
        t = time.monotonic()
        self.c.start("cachenode", [node])
        return time.monotonic() - t

    def await_rejoin(self, node, since):
        """Cluster mode: waits for the gateway's "joined" of `node` after `since`, then has the
        writers read back (sweep). Returns the seconds waited or None."""
        self.step(f"cachenode {node} rejoining")
        took = self.wait_log(f"add cache node {node}: joined", since,
                             f"cache node {node} to rejoin the ring")
        if took is None:
            return None
        self.step(f"cachenode {node} rejoined: sweep")
        self.ctx.sweep_gen += 1
        return took

    def await_removed(self, node, since):
        return self.wait_log(f"remove cache node {node}: removed", since,
                             f"the gateway to remove cache node {node}")

    # --- the nemeses (each returns a description, or None when it aborted)

    def kill_cache(self, node, _data, down):
        since = self.kill_cache_node(node)
        self.step(f"cachenode {node} down")
        if not self.ctx.sleep(down):
            return None
        took = self.restart_cache_node(node)
        what = f"kill -9 cachenode {node}, down {down:.1f}s, restart took {took:.1f}s"
        if not self.a.etcd:
            self.ctx.sweep_gen += 1
            return what
        joined = self.await_rejoin(node, since)
        return None if joined is None else f"{what}, rejoined {joined:.1f}s later"

    def wipe_cache(self, node, _data, down):
        """kill -9, the node's directory removed (a new, empty SSD: slot file, sequence mark,
        VDI table and ownership state gone), restart: a new incarnation, which must replay its
        old one's log home before it serves (docs/durability.md, "Incarnations")."""
        since = self.kill_cache_node(node)
        self.step(f"cachenode {node} down: its disk replaced")
        shutil.rmtree(self.c.node_dir("cachenode", node), ignore_errors=True)
        if not self.ctx.sleep(down):
            return None
        took = self.restart_cache_node(node, "restart on a new disk")
        what = (f"kill -9 cachenode {node}, its directory removed (new SSD), down {down:.1f}s, "
                f"restart took {took:.1f}s")
        if not self.a.etcd:
            self.ctx.sweep_gen += 1
            return what
        joined = self.await_rejoin(node, since)
        return None if joined is None else f"{what}, rejoined {joined:.1f}s later"

    def wipe_data(self, _node, data, down):
        """kill -9 one data node, remove its directory (a new, empty disk), restart it. Reads
        must never take its "absent" for zeros; the cache nodes log again what it held; the
        coordinator registers the VDIs there (incomplete) and refills it from the other
        replicas. The fault ends when the refill is done and every live cache node relogged."""
        node = data[0]
        since = self.ctx.gwlog.mark()
        caches = [i for i in range(1, self.a.cache_nodes + 1) if i not in self.ctx.removed]
        cache_logs = GatewayLog([self.c.log_path("cachenode", i) for i in caches])
        cache_since = cache_logs.mark()
        self.step(f"kill -9 datanode {node}")
        self.c.kill("datanode", [node])
        self.step(f"datanode {node} down: its disk replaced")
        shutil.rmtree(self.c.node_dir("datanode", node), ignore_errors=True)
        if not self.ctx.sleep(down):
            self.c.start("datanode", [node])
            return None
        self.step(f"restart datanode {node} on a new disk")
        self.c.start("datanode", [node])
        self.step(f"datanode {node} refilling")
        took = self.wait_log(f"data node {node}: refilled", since,
                             f"the coordinator to refill data node {node}")
        if took is None:
            return None
        self.step(f"datanode {node}: cache nodes logging again")
        # Until every cache node finished logging again what the node held (until then a dirty
        # block may have no log copy at all with N = 2: losing its cache node as well would be
        # a second fault).
        if not self.await_relogs(cache_logs, cache_since,
                                 f"data node {node} came back with another store",
                                 f"every cache node to log again what data node {node} held"):
            return None
        return (f"kill -9 datanode {node}, its directory removed (new disk), down {down:.1f}s; "
                f"refilled {took:.1f}s later, every cache node logged again")

    RELOG_START = re.compile(rb"logging \d+ dirty blocks again")
    RELOG_DONE = b"dirty blocks logged again: every one has its log copies"

    def await_relogs(self, logs, since, cause, what):
        """Waits until every cache node of `logs` logged again, in a pass that began at or after
        the first match of the regex `cause` (after `since`): a relog pass already running when
        the fault began covers none of its blocks, and its end must not count. True, or False (a
        problem is recorded) on timeout or abort."""
        cause_re = re.compile(cause.encode())

        def relogged(part):
            seen = cause_re.search(part)
            began = seen and self.RELOG_START.search(part, seen.start())
            return bool(began) and part.find(self.RELOG_DONE, began.end()) >= 0

        start = time.monotonic()
        while not all(relogged(part) for part in logs.read_each(since)):
            if time.monotonic() - start > self.a.settle_timeout:
                self.ctx.problem(f"timed out waiting for {what}")
                return False
            if not self.ctx.sleep(0.1):
                return False
        return True

    def ctl_ok(self, *argv):
        """ringcachectl; False (a problem is recorded) when it fails."""
        r = self.c.ctl(*argv)
        if r.returncode != 0:
            self.ctx.problem(f"ringcachectl {' '.join(argv)} failed: "
                             f"{(r.stderr or r.stdout).strip()}")
        return r.returncode == 0

    def lose_data(self, _node, data, _down):
        """kill -9 one data node for good. The gateway takes it out after the down-out interval
        and makes its replicas again on the others; every cache node logs again what it held.
        Then a new disk in its place: directory removed, started, `ringcachectl datanode in`;
        the fault ends when it joined the data ring again."""
        node = data[0]
        caches = [i for i in range(1, self.a.cache_nodes + 1) if i not in self.ctx.removed]
        cache_logs = GatewayLog([self.c.log_path("cachenode", i) for i in caches])
        cache_since = cache_logs.mark()
        since = self.ctx.gwlog.mark()
        self.step(f"kill -9 datanode {node} for good")
        self.c.kill("datanode", [node])
        self.step(f"datanode {node} lost: ringcachectl datanode out")
        if not self.ctl_ok("datanode", "out", str(node)):
            return None
        took = self.wait_log(f"data nodes {node} go out", since,
                             f"the gateway to take data node {node} out")
        if took is None:
            return None
        self.step(f"datanode {node} out: its replicas made again")
        if self.wait_rebalance_done(
                since, f"the replicas of data node {node} to be made again") is None:
            return None
        self.step(f"datanode {node} out: cache nodes logging again")
        if not self.await_relogs(cache_logs, cache_since, r"out of the data ring \([1-9]",
                                 f"every cache node to log again what data node {node} held"):
            return None
        done = self.ctx.log.now()
        self.step(f"datanode {node} replaced: new disk, datanode in")
        shutil.rmtree(self.c.node_dir("datanode", node), ignore_errors=True)
        self.c.start("datanode", [node])
        back = self.ctx.gwlog.mark()
        if not self.ctl_ok("datanode", "in", str(node)):
            return None
        joined = self.wait_log(f"data nodes {node} join", back,
                               f"data node {node} to join the data ring again")
        if joined is None or self.wait_rebalance_done(
                back, f"data node {node} to finish joining") is None:
            return None
        return (f"kill -9 datanode {node} for good: out {took:.1f}s later, replicas made again "
                f"and relogged by {done:.1f}s; replaced and back in the data ring")

    def scrub_report(self, node):
        """Data node `node`'s scrub report from `ringcachectl --json scrub status`, or None."""
        r = self.c.ctl("--json", "scrub", "status")
        if r.returncode != 0:
            return None
        try:
            nodes = json.loads(r.stdout)["nodes"]
        except (ValueError, KeyError):
            return None
        return next((n for n in nodes if n["id"] == node), None)

    def rot_data(self, _node, data, _down):
        """kill -9 one data node, flip a byte in 5 stored blocks and 5 log records of its store
        (checksums kept), restart it and start a scrub: the fault ends when its pass is done and
        nothing it found is open (blocks rewritten from good replicas, damaged records' blocks
        logged again by their cache nodes, obsolete ones reclaimed)."""
        node = data[0]
        self.step(f"kill -9 datanode {node}: rotting its disk")
        self.c.kill("datanode", [node])
        seed = self.rng.randrange(1 << 30)
        # A killed process's leader can show as a zombie while its other threads still exit and
        # hold the store's lock for a moment: try again briefly.
        for _ in range(100):
            r = subprocess.run([os.path.join(self.c.bin, "tests", "ringcache-rot-store"),
                                "--data-dir", self.c.node_dir("datanode", node), "--blocks", "5",
                                "--log-records", "5", "--seed", str(seed)],
                               capture_output=True, text=True)
            if r.returncode == 0 or "lock" not in r.stderr.lower():
                break
            time.sleep(0.1)
        self.c.start("datanode", [node])
        if r.returncode != 0:
            self.ctx.problem(f"ringcache-rot-store on data node {node} failed: {r.stderr}")
            return None
        rotten = len(r.stdout.splitlines())
        self.step(f"datanode {node}: scrub")
        start = time.monotonic()
        before = None
        while before is None:  # until the restarted node answers the coordinator
            before = self.scrub_report(node)
            if before is None and (time.monotonic() - start > self.a.settle_timeout
                                   or not self.ctx.sleep(0.2)):
                self.ctx.problem(f"data node {node} does not report its scrub")
                return None
        passes = before["passes"]
        self.c.ctl("scrub", "start")
        while True:
            now = self.scrub_report(node)
            if now is not None and now["passes"] > passes and now["open"] == 0:
                break
            if time.monotonic() - start > self.a.settle_timeout:
                self.ctx.problem(f"timed out waiting for data node {node}'s scrub to finish and "
                                 f"its findings to be repaired: {now}")
                return None
            if now is not None and now["passes"] == passes and not now["running"]:
                self.c.ctl("scrub", "start")  # a start lost to a restart race: ask again
            if not self.ctx.sleep(0.2):
                return None
        return (f"kill -9 datanode {node}, {rotten} copies rotted (seed {seed}), restarted; "
                f"scrub found {now['damaged_blocks_found']} blocks and "
                f"{now['damaged_log_records_found']} log records, all repaired "
                f"{time.monotonic() - start:.1f}s later")

    def disk_faults(self, node, text, role="datanode"):
        """Writes `role` `node`'s fault file (cluster.sh --fault-seams); "" clears it."""
        path = os.path.join(self.c.dir, "faults", f"{role}-{node}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)

    def slow_data(self, _node, data, _down):
        """One data node's fdatasyncs turn slow for a while; nothing may be lost or refused."""
        node = data[0]
        delay = self.rng.randint(50, 300)
        length = self.rng.uniform(2, self.a.max_down + 2)
        self.step(f"datanode {node}: slow disk ({delay} ms per sync)")
        self.disk_faults(node, f"sync_delay_ms={delay}\n")
        ok = self.ctx.sleep(length)
        self.disk_faults(node, "")
        if not ok:
            return None
        return f"datanode {node}: every sync {delay} ms slower for {length:.1f}s"

    def full_data(self, _node, data, _down):
        """One data node's disk fills up: its writes fail with ENOSPC and the node fences itself
        (sticky storage error). Then space is freed and the node restarted."""
        node = data[0]
        length = self.rng.uniform(1, self.a.max_down)
        self.step(f"datanode {node}: disk full")
        self.disk_faults(node, "full=1\n")
        ok = self.ctx.sleep(length)
        self.step(f"datanode {node}: space freed, restart")
        self.disk_faults(node, "")
        self.c.kill("datanode", [node])
        self.c.start("datanode", [node])
        if not ok:
            return None
        return f"datanode {node}: disk full for {length:.1f}s, then space freed and restarted"

    def await_resize(self, node, size, ram):
        """Follows cache node `node`'s resize to `size` until no shrink is pending (the
        released slots empty, the file cut); returns the seconds it took, or None (a problem is
        recorded) when it does not end within the settle timeout, or its RAM tier is not `ram`
        bytes. The node may be away for a while (restarted, rejoining): failed asks are asked
        again."""
        start = time.monotonic()
        last = ""
        while True:
            try:
                r = self.c.ctl("--json", "node", "resize", str(node), "--ssd", str(size),
                               "--no-wait", timeout=60)
                st = json.loads(r.stdout) if r.returncode == 0 else None
                last = (r.stderr or r.stdout).strip()
            except (subprocess.TimeoutExpired, ValueError) as e:
                st, last = None, str(e)
            if st is not None and st.get("target_bytes", 0) == 0:
                if st.get("ram_bytes") != ram:
                    self.ctx.problem(f"cachenode {node}: its RAM tier is {st.get('ram_bytes')} "
                                     f"bytes, not the {ram} it was resized to")
                    return None
                return time.monotonic() - start
            if st is not None:
                last = f"{st.get('blocks_to_move')} blocks still to move"
            if time.monotonic() - start > self.a.settle_timeout:
                self.ctx.problem(f"cachenode {node}: the resize to {size} bytes did not end "
                                 f"within {self.a.settle_timeout:.0f}s ({last})")
                return None
            if not self.ctx.sleep(0.5):
                return None

    def resize_cache(self, node, _data, down):
        """The node's SSD and RAM tiers grow, shrink below their configured sizes (blocks leave
        the released slots, dirty ones go home first; RAM demotes to the SSD) with, half the
        time, a kill -9 and restart in the middle of the shrink (it resumes, the RAM size
        holds), then grow back; the writers never stop."""
        size = parse_size(self.a.ssd_size)
        ram = parse_size(self.a.ram_size)
        big = size * self.rng.randint(2, 4)
        small = int(size * self.rng.uniform(0.25, 0.75)) // 65536 * 65536
        ram_big = ram * self.rng.randint(2, 4)
        ram_small = max(65536, int(ram * self.rng.uniform(0.25, 0.75)) // 65536 * 65536)
        if ram == 0:  # a node without a RAM tier gets none
            ram_big = ram_small = 0

        def ram_arg(n):
            return ["--ram", str(n)] if n else []
        self.step(f"cachenode {node}: SSD tier grows to {big} bytes, RAM to {ram_big}")
        if not self.ctl_ok("node", "resize", str(node), "--ssd", str(big), *ram_arg(ram_big)):
            return None
        if not self.ctx.sleep(down):  # writes land in the larger tiers
            return None
        self.step(f"cachenode {node}: SSD tier shrinks to {small} bytes, RAM to {ram_small}")
        if not self.ctl_ok("node", "resize", str(node), "--ssd", str(small),
                           *ram_arg(ram_small), "--no-wait"):
            return None
        what = f"cachenode {node}: SSD {size} -> {big} -> {small}, RAM {ram} -> {ram_big} -> " \
            f"{ram_small}"
        if self.rng.random() < 0.5:
            since = self.kill_cache_node(node)
            took = self.restart_cache_node(node, "restart in the middle of the shrink")
            what += f" (killed -9 in the middle of the shrink, restart took {took:.1f}s"
            if self.a.etcd:
                joined = self.await_rejoin(node, since)
                if joined is None:
                    return None
                what += f", rejoined {joined:.1f}s later"
            else:
                self.ctx.sweep_gen += 1
            what += ")"
        took = self.await_resize(node, small, ram_small)
        if took is None:
            return None
        what += f", shrink done {took:.1f}s after"
        self.step(f"cachenode {node}: SSD tier back to {size} bytes, RAM to {ram}")
        if not self.ctl_ok("node", "resize", str(node), "--ssd", str(size), *ram_arg(ram)):
            return None
        return what + f" -> {size} and {ram}"

    def slow_cache(self, node, _data, _down):
        """One cache node's SSD syncs turn slow for a while; nothing may be lost or refused."""
        delay = self.rng.randint(20, 150)
        length = self.rng.uniform(2, self.a.max_down + 2)
        self.step(f"cachenode {node}: slow SSD ({delay} ms per sync)")
        self.disk_faults(node, f"sync_delay_ms={delay}\n", "cachenode")
        ok = self.ctx.sleep(length)
        self.disk_faults(node, "", "cachenode")
        if not ok:
            return None
        return f"cachenode {node}: every SSD sync {delay} ms slower for {length:.1f}s"

    def full_cache(self, node, _data, _down):
        """One cache node's SSD fills up: its writes fail with ENOSPC and it fences itself
        (sticky storage error; writes routed to it fail, unacknowledged). Then space is freed
        and the node restarted on the same SSD."""
        length = self.rng.uniform(1, self.a.max_down)
        since = self.ctx.gwlog.mark()
        self.step(f"cachenode {node}: SSD full")
        self.disk_faults(node, "full=1\n", "cachenode")
        ok = self.ctx.sleep(length)
        self.step(f"cachenode {node}: space freed, restart")
        self.disk_faults(node, "", "cachenode")
        self.c.kill("cachenode", [node])
        took = self.restart_cache_node(node)
        if not ok:
            return None
        what = (f"cachenode {node}: SSD full for {length:.1f}s, then space freed and restarted "
                f"({took:.1f}s)")
        if not self.a.etcd:
            self.ctx.sweep_gen += 1
            return what
        joined = self.await_rejoin(node, since)
        return None if joined is None else f"{what}, rejoined {joined:.1f}s later"

    def kill_data(self, _node, data, down):
        what = f"datanode {','.join(map(str, data))}"
        self.step(f"kill -9 {what}")
        self.c.kill("datanode", data)
        self.step(f"{what} down")
        if not self.ctx.sleep(down):
            self.c.start("datanode", data)
            return None
        t = time.monotonic()
        self.step(f"restart {what}")
        self.c.start("datanode", data)
        return f"kill -9 {what}, down {down:.1f}s, restart took {time.monotonic() - t:.1f}s"

    def remove(self, node, _data, _down):
        since = self.kill_cache_node(node)
        self.step(f"ringcachectl node remove {node}")
        t = time.monotonic()
        r = self.c.ctl("--timeout", "600", "node", "remove", str(node), "--role", "cachenode",
                       timeout=620)
        msg = (r.stderr or r.stdout).strip()
        if not self.a.etcd:
            if r.returncode != 0:
                self.ctx.problem(f"ringcachectl node remove {node} failed: {msg}")
                self.c.start("cachenode", [node])  # so that stalled writers can finish
                return None
            self.ctx.removed.add(node)
            self.ctx.sweep_gen += 1  # its objects moved to their next owners: read back
            return f"kill -9 cachenode {node}, removed in {time.monotonic() - t:.1f}s (for good)"
        # Cluster mode: the watcher may be removing it too (its lease ran out): one of the two
        # removals is refused, the node is removed either way.
        note = "" if r.returncode == 0 else f" (the operator's removal was refused: {msg})"
        if self.await_removed(node, since) is None:
            return None
        removed = time.monotonic() - t
        self.step(f"undrain cachenode {node}")
        d = self.c.etcdctl("del", f"{ETCD_PREFIX}/draining/{node}")
        if d.returncode != 0:
            self.ctx.problem(f"etcdctl del {ETCD_PREFIX}/draining/{node}: {d.stderr.strip()}")
            return None
        took = self.restart_cache_node(node)
        joined = self.await_rejoin(node, since)
        if joined is None:
            return None
        return (f"kill -9 cachenode {node}, removed by the operator in {removed:.1f}s{note}, "
                f"drained mark deleted, restart took {took:.1f}s, rejoined {joined:.1f}s later")

    def rejoin(self, node, _data, _down):
        since = self.kill_cache_node(node)
        self.step(f"cachenode {node} down, awaiting its removal")
        removed = self.await_removed(node, since)
        if removed is None:
            return None
        state = self.c.cache_states().get(node, "?")
        if state != "removed":
            self.log(f"note: the gateway logged cache node {node} removed, node list says {state}")
        gap = self.rng.uniform(0.2, 2.0)  # the writers go on; its objects are elsewhere now
        self.step(f"cachenode {node} removed, writers go on")
        if not self.ctx.sleep(gap):
            return None
        took = self.restart_cache_node(node)
        joined = self.await_rejoin(node, since)
        if joined is None:
            return None
        return (f"kill -9 cachenode {node}, removed after {removed:.1f}s (node list: {state}), "
                f"restarted {gap:.1f}s later (took {took:.1f}s), rejoined {joined:.1f}s later")

    def pause(self, node, _data, _down):
        hold = self.a.pause_s or self.a.lease_ttl + self.rng.uniform(1.0, 3.0)
        since = self.ctx.gwlog.mark()
        self.step(f"SIGSTOP cachenode {node} (cut off for {hold:.1f}s)")
        pid = self.c.stop_process("cachenode", node)
        try:
            ok = self.ctx.sleep(hold)
        finally:
            self.step(f"SIGCONT cachenode {node} (healed)")
            self.c.continue_process(pid)
        if not ok:
            return None
        out = f"cachenode {node} stopped for {hold:.1f}s (lease {self.a.lease_ttl}s)"
        text = f"cache node {node}: "
        taken = f"{text}registration gone"
        again = f"{text}registered again under a new lease"
        # Removed while stopped (lease expired), or once continued (it found its lease gone and
        # registered again): either way it leaves and rejoins. Give the second a moment.
        for _ in range(int((self.a.lease_ttl + 3) / 0.1)):
            if self.ctx.gwlog.find(taken, since) or self.ctx.gwlog.find(again, since):
                break
            if not self.ctx.sleep(0.1):
                return None
        else:
            return f"{out}; its lease survived (no removal, no rejoin)"
        removed = "removed while stopped" if self.ctx.gwlog.find(taken, since) else \
            "removed after it registered again"
        joined = self.await_rejoin(node, since)
        if joined is None:
            return None
        return f"{out}; {removed}; rejoined {joined:.1f}s after the heal"

    def data_during_join(self, node, data, down):
        since = self.kill_cache_node(node)
        wait = self.rng.uniform(0.2, self.a.max_down)
        self.step(f"cachenode {node} down")
        if not self.ctx.sleep(wait):
            return None
        took = self.restart_cache_node(node)
        # When the data nodes die: as soon as the restarted node is ready (before the gateway
        # starts its join), when the join starts holding requests (its handoff destage needs
        # every home), or once that destage is done (drops, registration, data ring).
        trigger = self.rng.choice(["ready", "holding requests for the objects it takes over",
                                   "holding requests for the objects it takes over",
                                   "the objects that move are destaged"])
        if trigger != "ready":
            self.step(f"cachenode {node} restarted, awaiting its join")
            if self.wait_log(f"add cache node {node}: {trigger}", since,
                             f"cache node {node}'s join ('{trigger}')", poll=0.01) is None:
                return None
        what = f"datanode {','.join(map(str, data))}"
        self.step(f"kill -9 {what} during the join of cachenode {node}")
        self.kill_now("datanode", data)
        late = self.ctx.gwlog.find(f"add cache node {node}: joined", since)
        self.step(f"{what} down during the join of cachenode {node}")
        ok = self.ctx.sleep(down)
        self.step(f"restart {what}")
        self.c.start("datanode", data)
        if not ok:
            return None
        joined = self.await_rejoin(node, since)
        if joined is None:
            return None
        retries = self.ctx.gwlog.count(f"add cache node {node}: not ready yet", since)
        return (f"kill -9 cachenode {node}, restarted after {wait:.1f}s (took {took:.1f}s); "
                f"kill -9 {what} at '{trigger}'{' (the join had finished already)' if late else ''}"
                f", down {down:.1f}s; rejoined {joined:.1f}s after the kill of the data nodes"
                f"{f', the join retried {retries} time(s)' if retries else ''}")

    def restart_during_replay(self, node, _data, _down):
        since = self.kill_cache_node(node)
        self.step(f"cachenode {node} down, awaiting the replay of its log")
        waited = self.wait_log(f"remove cache node {node}: node does not answer: replaying its "
                               "write-back log", since, f"the gateway to replay cache node {node}'s "
                               "log")
        if waited is None:
            return None
        took = self.restart_cache_node(node, "restart during replay:")
        overlap = ("the replay had finished before it was ready"
                   if self.ctx.gwlog.find(f"remove cache node {node}: removed", since)
                   else "ready while the replay ran")
        joined = self.await_rejoin(node, since)
        if joined is None:
            return None
        return (f"kill -9 cachenode {node}, replay began after {waited:.1f}s, restarted at once "
                f"(took {took:.1f}s, {overlap}), rejoined {joined:.1f}s later")


    def kill_coordinator(self, node, _data, down):
        leader = self.c.leader()
        if leader is None:
            self.ctx.problem("kill-coordinator: no coordinator is elected (P/coordinator)")
            return None
        since = self.kill_cache_node(node)
        # When the leader dies: as the removal starts, or once it replays the node's log (the
        # node does not answer: it was killed).
        trigger = self.rng.choice([f"remove cache node {node}",
                                   f"remove cache node {node}: node does not answer: replaying "
                                   "its write-back log"])
        self.step(f"cachenode {node} down, awaiting the coordinator's removal")
        if self.wait_log(trigger, since, f"gateway {leader} to remove cache node {node}",
                         poll=0.01) is None:
            return None
        if self.c.leader() != leader:
            self.ctx.problem(f"kill-coordinator: the leader changed from gateway {leader} to "
                             f"{self.c.leader()} without a fault")
            return None
        late = self.ctx.gwlog.find(f"remove cache node {node}: removed", since)
        self.step(f"kill -9 gateway {leader} (the coordinator) at '{trigger}'")
        self.kill_now("gateway", [leader])
        killed = time.monotonic()
        self.step(f"gateway {leader} killed, awaiting another coordinator")
        new = None
        while time.monotonic() - killed < self.a.settle_timeout:
            new = self.c.leader()
            if new is not None and new != leader:
                break
            # Each try is an etcdctl (a tenth of a CPU-second on the loaded machine): 5 a second.
            if not self.ctx.sleep(0.2):
                return None
        else:
            self.ctx.problem(f"no gateway was elected within {self.a.settle_timeout:.0f}s after "
                             f"the coordinator (gateway {leader}) was killed")
            return None
        takeover = time.monotonic() - killed
        self.ctx.takeovers.append(takeover)
        self.step(f"gateway {new} elected; gateway {leader} down")
        if not self.ctx.sleep(down):
            return None
        self.step(f"restart gateway {leader}")
        self.c.start("gateway", [leader])
        if self.await_removed(node, since) is None:
            return None
        took = self.restart_cache_node(node)
        joined = self.await_rejoin(node, since)
        if joined is None:
            return None
        if self.c.leader() != new:
            self.ctx.problem(f"the restarted gateway {leader} took the lead from gateway {new}")
            return None
        return (f"kill -9 cachenode {node}, kill -9 gateway {leader} (coordinator) at "
                f"'{trigger}'{' (the removal had finished)' if late else ''}; gateway {new} "
                f"elected {takeover:.1f}s later (lease {self.a.lease_ttl}s), gateway {leader} "
                f"restarted after {down:.1f}s as a follower; cache node restarted (took "
                f"{took:.1f}s), rejoined {joined:.1f}s later")


    def await_new_leader(self, old, since_t):
        """Waits until a gateway other than `old` leads; returns its id (the seconds from
        `since_t` go to the takeover times) or None."""
        while time.monotonic() - since_t < self.a.settle_timeout:
            new = self.c.leader()
            if new is not None and new != old:
                self.ctx.takeovers.append(time.monotonic() - since_t)
                return new
            if not self.ctx.sleep(0.2):  # an etcdctl per try, as above
                return None
        self.ctx.problem(f"no gateway was elected within {self.a.settle_timeout:.0f}s after "
                         f"the coordinator (gateway {old}) stopped")
        return None

    def pause_coordinator(self, node, _data, down):
        leader = self.c.leader()
        if leader is None:
            self.ctx.problem("pause-coordinator: no coordinator is elected (P/coordinator)")
            return None
        phase = self.rng.choice(["removal", "join"])
        since = self.kill_cache_node(node)
        if phase == "removal":
            trigger = self.rng.choice([f"remove cache node {node}",
                                       f"remove cache node {node}: node does not answer: "
                                       "replaying its write-back log"])
        else:
            if self.await_removed(node, since) is None:
                return None
            self.restart_cache_node(node)
            trigger = self.rng.choice([
                f"add cache node {node}: holding requests for the objects it takes over",
                f"add cache node {node}: the objects that move are destaged"])
        self.step(f"awaiting '{trigger}' of gateway {leader}")
        if self.wait_log(trigger, since, f"gateway {leader}: '{trigger}'", poll=0.01) is None:
            return None
        if self.c.leader() != leader:
            self.ctx.problem(f"pause-coordinator: the leader changed from gateway {leader} to "
                             f"{self.c.leader()} without a fault")
            return None
        self.step(f"SIGSTOP gateway {leader} (the coordinator) at '{trigger}'")
        pid = self.c.stop_process("gateway", leader)
        stopped = time.monotonic()
        try:
            new = self.await_new_leader(leader, stopped)
            ok = new is not None and self.ctx.sleep(down)
        finally:
            self.step(f"SIGCONT gateway {leader} (its term ended while it was stopped)")
            self.c.continue_process(pid)
        if not ok:
            return None
        held = time.monotonic() - stopped
        if phase == "removal":
            if self.await_removed(node, since) is None:
                return None
            self.restart_cache_node(node)
        joined = self.await_rejoin(node, since)
        if joined is None:
            return None
        refused = self.ctx.gwlog.count("stale coordinator term", since)
        return (f"kill -9 cachenode {node}; SIGSTOP gateway {leader} (coordinator) during the "
                f"{phase} at '{trigger}' for {held:.1f}s; gateway {new} elected, finished it; "
                f"rejoined {joined:.1f}s later"
                f"{f'; {refused} step(s) of the ended term refused' if refused else ''}")


    def partition_coordinator(self, node, _data, down):
        """A partial partition: the coordinator cut from cache node `node`, the node cut from
        etcd; the other gateways still reach it. Healed once the node was removed."""
        leader = self.c.leader()
        if leader is None:
            self.ctx.problem("partition-coordinator: no coordinator is elected (P/coordinator)")
            return None
        since = self.ctx.gwlog.mark()
        ready = self.c.ready("cachenode", node)
        ports = [ready["grpc_port"], ready["data_port"]]
        etcd_port = int(self.c.etcd_endpoint.rsplit(":", 1)[1])
        cut = loopback_cut.LoopbackCut(f"rc-fault-{os.getpid()}")
        self.step(f"cut gateway {leader} (the coordinator) from cachenode {node} (ports "
                  f"{ports[0]}, {ports[1]}) and cachenode {node} from etcd")
        try:
            cut.cut([(self.c.pid("gateway", leader), ports),
                     (self.c.pid("cachenode", node), [etcd_port])])
            cut_at = time.monotonic()
            replay = f"remove cache node {node}: node does not answer: replaying its write-back log"
            if self.wait_log(replay, since, f"gateway {leader} to replay cache node {node}'s "
                             "log") is None:
                return None
            if self.await_removed(node, since) is None:
                return None
            removed = time.monotonic() - cut_at
            if not self.ctx.sleep(down):
                return None
        finally:
            self.step(f"heal the partition around cachenode {node}")
            cut.heal()
        joined = self.await_rejoin(node, since)
        if joined is None:
            return None
        if self.c.leader() != leader:
            self.ctx.problem(f"partition-coordinator: the leader changed from gateway {leader} "
                             f"to {self.c.leader()}; it never lost etcd")
            return None
        others = ", ".join(str(g) for g in range(1, self.a.gateways + 1) if g != leader)
        return (f"gateway {leader} (coordinator) cut from cachenode {node}, the node from etcd, "
                f"gateway(s) {others} still reaching it: its log sealed and replayed, removed "
                f"{removed:.1f}s after the cut; healed {down:.1f}s later, rejoined {joined:.1f}s after the heal")

    def lose_etcd(self, _node, _data, _down):
        """etcd's disk is lost and etcd comes back from the last backup (docs/upgrades.md,
        "Backup and restore"): the gateways stopped (SIGTERM), etcd killed and its data removed,
        the backup's snapshot restored (etcdctl snapshot restore) and etcd started on it,
        `ringcachectl restore` raises it to what the nodes did since (the faults since the
        backup: epochs, terms, VDIs), the data and cache nodes restart, the gateways start and
        every cache node rejoins. The writers' connections break with the gateways and are made
        again (their requests sent again). Then a new backup for the next lose-etcd."""
        c, a = self.c, self.a
        gateways = list(range(1, a.gateways + 1))
        datas = list(range(1, a.data_nodes + 1))
        caches = [i for i in range(1, a.cache_nodes + 1) if i not in self.ctx.removed]
        backup = self.ctx.etcd_backup
        t = time.monotonic()
        self.step("lose-etcd: stop the gateways")
        c.stop("gateway", gateways)
        self.step("lose-etcd: kill etcd, remove its data directory")
        r = c.sh("kill", "etcd", "0")
        if r.returncode != 0:
            raise DaemonError(f"cluster.sh kill etcd: {r.stdout}{r.stderr}")
        shutil.rmtree(os.path.join(c.dir, "etcd"))
        self.step(f"lose-etcd: restore {backup}")
        peer = f"http://127.0.0.1:{self.c.base - 2}"
        r = subprocess.run(["etcdctl", "snapshot", "restore", os.path.join(backup, "etcd.db"),
                            "--data-dir", os.path.join(c.dir, "etcd"), "--name", "ringcache",
                            "--initial-cluster", f"ringcache={peer}",
                            "--initial-advertise-peer-urls", peer],
                           env=dict(os.environ, ETCDCTL_API="3"), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise DaemonError(f"etcdctl snapshot restore: {r.stdout}{r.stderr}")
        r = c.sh("start", "etcd")
        if r.returncode != 0:
            raise DaemonError(f"cluster.sh start etcd: {r.stdout}{r.stderr}")
        self.step("lose-etcd: ringcachectl restore")
        r = subprocess.run([c.ctl_bin, "--etcd", c.etcd_endpoint, "--etcd-prefix", ETCD_PREFIX,
                            "restore", backup], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            self.ctx.problem(f"ringcachectl restore failed: {r.stdout}{r.stderr}")
            return None
        found = [line for line in r.stdout.splitlines()
                 if line.startswith(("data ring:", "cache ring:", "terms:", "catalog:"))]
        self.step("lose-etcd: restart the data and cache nodes")
        c.stop("datanode", datas)
        c.start("datanode", datas)
        since = self.ctx.gwlog.mark()
        c.stop("cachenode", caches)
        c.start("cachenode", caches)
        self.step("lose-etcd: start the gateways")
        c.start("gateway", gateways)
        down = time.monotonic() - t
        for node in caches:
            if self.await_rejoin(node, since) is None:
                return None
        took = time.monotonic() - t
        take_etcd_backup(self.ctx)
        return (f"etcd lost, restored from backup {os.path.basename(backup)}: "
                f"{'; '.join(found)}; gateways back {down:.1f}s after they stopped, every cache "
                f"node rejoined {took:.1f}s after")

    def upgrade_plan(self):
        """The rolling upgrade's order: data nodes, cache nodes, gateways (docs/upgrades.md)."""
        return daemons_of(self.a, self.ctx.removed)

    def upgrade(self, _node, _data, _down):
        """The next step of a rolling upgrade: one daemon stopped (SIGTERM) and started from the
        other release's build. Steps go forward to --bin, then back in reverse to --old-bin (a
        downgrade), and so on."""
        plan = self.upgrade_plan()
        step = getattr(self, "upgrade_steps", 0)
        self.upgrade_steps = step + 1
        forward = (step // len(plan)) % 2 == 0
        role, nid = (plan if forward else plan[::-1])[step % len(plan)]
        target = self.c.bin if forward else self.c.start_bin
        verb = "upgrade" if forward else "downgrade"
        since = self.ctx.gwlog.mark()
        self.step(f"{verb} {role} {nid}: stop (SIGTERM)")
        t = time.monotonic()
        self.c.stop(role, [nid])
        self.c.node_bin[(role, nid)] = target
        self.step(f"{verb} {role} {nid}: start from {target}")
        self.c.start(role, [nid])
        took = time.monotonic() - t
        exe = os.path.realpath(f"/proc/{self.c.pid(role, nid)}/exe")
        if not exe.startswith(os.path.realpath(target) + os.sep):
            self.ctx.problem(f"{verb} {role} {nid}: runs {exe}, not the build of {target}")
            return None
        what = f"{verb} {role} {nid} to {release_of(target)}: restarted in {took:.1f}s"
        if role == "cachenode" and self.a.etcd:
            joined = self.await_rejoin(nid, since)
            if joined is None:
                return None
            what += f", rejoined {joined:.1f}s later"
        elif role == "cachenode":
            self.ctx.sweep_gen += 1
        new_gateways = [g for g in range(1, self.a.gateways + 1)
                        if self.c.bin_of("gateway", g) == self.c.bin]
        if self.a.etcd and new_gateways:
            # Asked of a gateway that runs this build, `cluster version` must list the node
            # under the release it runs now (a release before 0.2.0 says none: "unknown").
            want = release_of(target) if forward else None
            seen = self.await_listed_release(new_gateways[0], role, nid, want)
            if seen is None:
                return None
            what += f"; `cluster version` lists it under {want or 'unknown'} ({seen:.1f}s)"
        return what

    def await_listed_release(self, gateway, role, nid, want):
        """Waits until `ringcachectl cluster version` through `gateway` lists `role nid` under
        release `want` (None: unknown); returns the seconds it took, or None (a problem is
        recorded)."""
        start, last = time.monotonic(), ""
        while time.monotonic() - start < 30:
            r = self.c.ctl("--json", "cluster", "version", gateway=gateway)
            if r.returncode == 0:
                last = r.stdout.strip()
                releases = json.loads(last)["releases"]
                if f"{role} {nid}" in releases.get(want or "unknown", []):
                    return time.monotonic() - start
            else:
                last = r.stderr.strip()
            if not self.ctx.sleep(0.5):
                return None
        self.ctx.problem(f"`ringcachectl cluster version` does not list {role} {nid} under "
                         f"{want or 'unknown'} 30 s after its restart: {last}")
        return None


def take_etcd_backup(ctx):
    """`ringcachectl backup` of the cluster's etcd into a new directory; lose-etcd restores the
    latest one."""
    c = ctx.cluster
    ctx.etcd_backups += 1
    path = os.path.join(os.path.dirname(c.dir), f"etcd-backup-{ctx.etcd_backups}")
    r = subprocess.run([c.ctl_bin, "--etcd", c.etcd_endpoint, "--etcd-prefix", ETCD_PREFIX,
                        "backup", path], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise DaemonError(f"ringcachectl backup: {r.stdout}{r.stderr}")
    ctx.etcd_backup = path
    ctx.log(f"etcd backup {ctx.etcd_backups}: {r.stdout.strip()}")


def daemons_of(a, removed=()):
    """(role, id) of every daemon, in the upgrade order: data nodes, cache nodes (those not
    removed), gateways (docs/upgrades.md)."""
    return ([("datanode", i) for i in range(1, a.data_nodes + 1)]
            + [("cachenode", i) for i in range(1, a.cache_nodes + 1) if i not in removed]
            + [("gateway", g) for g in range(1, a.gateways + 1)])


def finalize_upgrade(ctx, vdi):
    """After a rolling upgrade that ended on this build everywhere: what the feature level gates
    (a VDI's I/O limits) is refused until `cluster finalize` raises the level, then accepted
    (docs/upgrades.md). A high limit: the checker's own writes go through it, unslowed."""
    c, a = ctx.cluster, ctx.args
    if any(c.bin_of(*d) != c.bin for d in daemons_of(a)) or not a.etcd:
        ctx.log("rolling upgrade: not every daemon runs this build (or static mode): no finalize")
        return
    limit = ("vdi", "set-qos", vdi, "--write-iops", "1000000")
    r = c.ctl(*limit)
    if r.returncode == 0 or "feature level" not in r.stderr:
        ctx.problem(f"`ringcachectl vdi set-qos` before finalize: want a refusal naming the "
                    f"feature level, got exit {r.returncode}: {(r.stderr or r.stdout).strip()}")
        return
    r = c.ctl("--json", "cluster", "version")
    top = json.loads(r.stdout).get("max_feature_level") if r.returncode == 0 else None
    r = c.ctl("cluster", "finalize")
    if r.returncode != 0 or f"raised from 1 to {top}" not in r.stdout:
        ctx.problem(f"`ringcachectl cluster finalize`: exit {r.returncode}: "
                    f"{(r.stderr or r.stdout).strip()}")
        return
    ctx.log(f"rolling upgrade: {r.stdout.strip()}")
    r = c.ctl("--json", "cluster", "version")
    v = json.loads(r.stdout) if r.returncode == 0 else {}
    if v.get("feature_level") != top or not v.get("uniform"):
        ctx.problem(f"`ringcachectl cluster version` after finalize: {r.stdout or r.stderr}")
        return
    r = c.ctl(*limit)
    if r.returncode != 0:
        ctx.problem(f"`ringcachectl vdi set-qos` after finalize: {(r.stderr or r.stdout).strip()}")
        return
    ctx.log(f"rolling upgrade: feature level {top}; {r.stdout.strip()}")


def record_id(raw):
    """A node record's id, from either version of etcd's values (docs/upgrades.md, "What etcd
    holds"): JSON, or an EtcdValue message (proto/ringcache/v1/etcd.proto: its field 2 is the
    node, whose field 2 is the id). ValueError when it is neither."""
    if raw[:1] != b"\x08":
        return int(json.loads(raw)["id"])

    def fields(b):  # (number, value) of each field: ints for varints, bytes for the others
        i = 0
        while i < len(b):
            key, i = varint(b, i)
            kind = key & 7
            if kind == 0:
                v, i = varint(b, i)
            elif kind == 2:
                n, i = varint(b, i)
                v, i = b[i:i + n], i + n
            elif kind in (1, 5):
                n = 8 if kind == 1 else 4
                v, i = b[i:i + n], i + n
            else:
                raise ValueError(f"wire type {kind}")
            yield key >> 3, v

    def varint(b, i):
        v = shift = 0
        while True:
            if i >= len(b):
                raise ValueError("truncated")
            v |= (b[i] & 0x7F) << shift
            shift += 7
            i += 1
            if not b[i - 1] & 0x80:
                return v, i

    node = dict(fields(raw)).get(2)
    if not isinstance(node, bytes):
        raise ValueError("no node record")
    return dict(fields(node)).get(2, 0)


def release_of(bin_dir):
    """'0.2.0': the release of a build, from the first line of its gateway's --version."""
    r = subprocess.run([os.path.join(bin_dir, "gateway", "ringcache-gateway"), "--version"],
                       capture_output=True, text=True, timeout=30)
    return ((r.stdout.splitlines() or ["? (no --version)"])[0].split() or ["?"])[-1]


def check_daemons(ctx):
    """Restarts daemons that died without being killed and records each as a problem."""
    c = ctx.cluster
    for role, node_id in c.down_members():
        if role == "cachenode" and node_id in ctx.removed:
            continue
        if role == "etcd":
            try:
                with open(os.path.join(c.dir, "logs", "etcd.log"), errors="replace") as f:
                    tail = "".join(f.readlines()[-15:])
            except OSError:
                tail = "(no log)\n"
            ctx.problem(f"etcd died; log tail:\n{tail}")
            continue
        ctx.problem(f"{role} {node_id} died without being killed; log tail:\n"
                    f"{c.tail(role, node_id)}")
        try:
            c.start(role, [node_id])
        except DaemonError as e:
            ctx.problem(str(e))


def run_phase(ctx, state, faults, seconds, nemesis, rng):
    a = ctx.args
    max_data = min(state.replication - 1, a.data_nodes - 1)
    plan = f"{seconds:.0f}s of faults" if seconds else f"{faults} faults"
    ctx.log(f"phase {state.name} (replication {state.replication}): {a.writers} writers"
            f"{f' (at most {a.max_iops:g} requests/s)' if a.max_iops else ''}, {plan}, "
            f"at most {max_data} data node(s) down at once")
    ctx.stop_writers.clear()
    owned = make_chunks(state, a.writers)
    writers = [Writer(ctx, state, i, owned[i], rng.randrange(1 << 62)) for i in range(a.writers)]
    for w in writers:
        w.start()
    ctx.sleep(2.0)
    deadline = time.monotonic() + seconds
    injected = 0
    while (time.monotonic() < deadline) if seconds else (injected < faults):
        if not ctx.sleep(rng.uniform(0.5, a.max_gap)):
            break
        try:
            nemesis.inject(state.name, max_data)
        except DaemonError as e:
            ctx.problem(str(e))
        injected += 1
        check_daemons(ctx)
        if ctx.abort.is_set():
            break
    ctx.sleep(2.0)
    ctx.stop_writers.set()
    for w in writers:
        w.join(a.io_timeout + 60)
        if w.is_alive():
            ctx.problem(f"{w.name} did not stop")
    acked = sum(w.acked for w in writers)
    failed = sum(w.failed for w in writers)
    ctx.acked += acked
    ctx.failed += failed
    ctx.abandoned += sum(w.abandoned for w in writers)
    ctx.reads += sum(w.reads for w in writers)
    ctx.sweep_reads += sum(w.sweep_reads for w in writers)
    ctx.longest = max([ctx.longest] + [w.stall_max for w in writers])
    ctx.ack_gap = max([ctx.ack_gap] + [w.ack_gap_max for w in writers])
    ctx.log(f"phase {state.name}: {acked} writes acknowledged, {failed} failed "
            f"({sum(w.abandoned for w in writers)} abandoned by the client), "
            f"{sum(w.reads for w in writers)} reads verified "
            f"({sum(w.sweep_reads for w in writers)} of them sweeps; "
            f"{sum(w.read_errors for w in writers)} failed), "
            f"{sum(w.reconnects for w in writers)} reconnects, longest request "
            f"{max(w.stall_max for w in writers):.1f}s, longest gap between two acknowledged "
            f"writes of a writer {max(w.ack_gap_max for w in writers):.1f}s")
    if acked == 0:
        ctx.problem(f"phase {state.name}: no write was acknowledged")


class SideLoad:
    """--side-load QD: fio (ioengine=nbd) 4K random reads and writes at queue depth QD on a VDI
    of its own, for the whole run. Its requests stuck behind a stopped or dead node must not
    hold up the checker's writers (the gateway's per-VDI worker lanes, gateway/README.md)."""

    def __init__(self, ctx, depth):
        c = ctx.cluster
        self.ctx, self.proc = ctx, None
        r = c.ctl("vdi", "create", "fault-side", "--size", str(64 << 20), "--replication", "2")
        if r.returncode != 0:
            raise SetupError(f"ringcachectl vdi create fault-side: {r.stderr.strip()}")
        self.out = os.path.join(c.dir, "side-load.json")
        cmd = ["fio", "--name=side", "--ioengine=nbd",
               f"--uri=nbd://127.0.0.1:{c.nbd_port}/fault-side", "--rw=randrw", "--bs=4k",
               f"--iodepth={depth}", "--size=64m", "--time_based=1", "--runtime=86400",
               # At most 1,000 IOPS, to leave the CPU to the cluster and the writers: requests
               # still pile up to QD behind a stuck node.
               "--rate_iops=500,500",
               "--continue_on_error=all", "--output-format=json", f"--output={self.out}"]
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True)
        except OSError as e:
            raise SetupError(f"--side-load needs fio: {e}") from e
        ctx.log(f"side load: fio 4K random reads and writes at QD{depth} (1,000 IOPS at most) "
                f"on fault-side")
        self.result = None

    def stop(self):
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        proc.send_signal(signal.SIGINT)  # fio stops and writes its report
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        try:
            with open(self.out) as f:
                text = f.read()
            job = json.loads(text[text.index("{"):])["jobs"][0]
            self.result = (f"{job['read']['iops']:.0f} read and {job['write']['iops']:.0f} "
                           f"write IOPS, {job.get('total_err', 0)} I/O errors")
        except (OSError, ValueError, KeyError, IndexError) as e:
            self.result = f"no report ({e}; fio: {(err or '').strip()[-200:]})"
        self.ctx.log(f"side load: {self.result}")

    def summary(self):
        return self.result or "still running"


def read_range(h, first, count, timeout):
    """Reads blocks [first, first+count) with a deadline; returns bytes or raises."""
    data = read_batch(h, [(first, count)], timeout)[0]
    if isinstance(data, Exception):
        raise data
    return data


def check_tls_enforced(cluster, vdi, log):
    """--tls: the run proves nothing about TLS unless plaintext is refused; a plaintext client
    must be turned away before it reaches the VDI (the gateway requires STARTTLS)."""
    h = nbd.NBD()
    try:
        h.connect_uri(f"nbd://127.0.0.1:{cluster.nbd_port}/{vdi}")
    except nbd.Error as e:
        log(f"TLS: a plaintext NBD client is refused ({e})")
        return
    raise SetupError("--tls: the gateway served a plaintext NBD client; TLS is not enforced")


_BATCH_BUFS = {}


def read_batch(h, ranges, timeout):
    """Reads the block ranges [(first, count)] with all of them in flight at once (one deadline
    for the batch); returns per range its bytes, or the exception its read ended with."""
    cookies = []
    for n, (first, count) in enumerate(ranges):
        ba = _BATCH_BUFS.get((n, count))
        if ba is None:
            ba = _BATCH_BUFS[(n, count)] = bytearray(count * BLOCK)
        buf = nbd.Buffer.from_buffer(ba)
        try:
            cookies.append((buf, h.aio_pread(buf, first * BLOCK)))
        except nbd.Error as e:
            cookies.append((None, e))
    deadline = time.monotonic() + timeout
    out = []
    for n, ((first, count), (buf, cookie)) in enumerate(zip(ranges, cookies)):
        if buf is None:
            out.append(cookie)
            continue
        try:
            while not h.aio_command_completed(cookie):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"read of blocks {first}+{count} took over {timeout:.0f}s")
                h.poll(200)
            out.append(bytes(buf.to_bytearray()))
        except (nbd.Error, TimeoutError) as e:
            _BATCH_BUFS.pop((n, count), None)  # may still be libnbd's until the handle closes
            out.append(e)
    return out


def verify(ctx, state, label):
    """Reads every block of the VDI, records the bad ones (ctx.record_bad) and returns the
    number of written blocks checked. Four 1 MiB reads at a time (the cache nodes serve them
    side by side); a read that fails is retried alone on a new connection."""
    h = ctx.cluster.open_nbd(state.name)
    step = 256  # 1 MiB reads
    depth = 4
    checked = nonzero = bad = 0
    ranges = [(first, min(step, state.nblocks - first)) for first in range(0, state.nblocks, step)]
    for at in range(0, len(ranges), depth):
        batch = ranges[at:at + depth]
        for (first, count), data in zip(batch, read_batch(h, batch, ctx.args.io_timeout)):
            attempt = 0
            while isinstance(data, Exception):
                ctx.log(f"verify {state.name}: read of blocks {first}+{count} failed ({data}); "
                        f"retrying")
                if attempt == 5:
                    data = None  # judged lost
                    break
                time.sleep(1 + attempt)
                attempt += 1
                h = ctx.cluster.open_nbd(state.name)
                try:
                    data = read_range(h, first, count, ctx.args.io_timeout)
                except (nbd.Error, TimeoutError) as e:
                    data = e
            checked, nonzero, bad = judge_range(ctx, state, label, first, count, data,
                                                checked, nonzero, bad)
    h.shutdown()
    ctx.log(f"verify {state.name} ({label}): {checked} written blocks read, {bad} bad in this "
            f"pass ({nonzero} never-written blocks not zero); {ctx.count('lost')} lost and "
            f"{ctx.count('stale')} stale blocks so far")
    return checked


def judge_range(ctx, state, label, first, count, data, checked, nonzero, bad):
    """Judges the blocks [first, first+count) read as `data` (None: the read failed: lost);
    returns the updated (checked, nonzero, bad)."""
    for i in range(count):
        b = first + i
        written = state.next_version[b] > 0
        checked += written
        if data is None:
            found = ("lost", "a read error")
        else:
            found = state.judge(ctx.seed, b, data[i * BLOCK:(i + 1) * BLOCK])
        if found is not None:
            nonzero += not written
            bad += 1
            ctx.record_bad(state, b, found[0], found[1], f"verify {label}")
    return checked, nonzero, bad


def describe_bad(ctx, category, limit=10):
    lines = []
    with ctx.mu:
        items = sorted((k, v[category]) for k, v in ctx.bad.items() if category in v)
    for (name, b), (expected, found, label, acked_at, acks, unacked, t_read) in items[:limit]:
        since = ctx.faults_between(acked_at if acked_at is not None else 0.0, t_read)
        when = f"last ack at {acked_at:.1f}s" if acked_at is not None else "never acknowledged"
        lines.append(f"  {name} block {b} (object {b // BLOCKS_PER_OBJECT}, offset "
                     f"{b * BLOCK}): expected {expected}, found {found} [{label}; {when}; "
                     f"acks: {acks}; failed: {','.join(f'v{v}' for v in unacked) or 'none'}; "
                     f"faults between the last ack and the read: "
                     f"{', '.join(since[:6]) or 'none'}{' ...' if len(since) > 6 else ''}]")
    if len(items) > limit:
        lines.append(f"  ... and {len(items) - limit} more")
    # The likely culprit of each bad block: the first fault that overlaps the time between its
    # last acknowledgement and its bad read (the version read was overwritten by then).
    after = collections.Counter()
    for _, v in items:
        acked_at, t_read = v[3] if v[3] is not None else 0.0, v[-1]
        hit = [i for i, f in enumerate(ctx.faults) if f[1] >= acked_at and f[0] <= t_read]
        after[hit[0] if hit else -1] += 1
    lines.append("  by the first fault between the last acknowledgement and the bad read: "
                 + ", ".join(f"fault {i + 1} [{ctx.faults[i][3]}]: {n}" if i >= 0
                             else f"none: {n}" for i, n in sorted(after.items())))
    return lines


def wait_all_up(ctx, timeout=60):
    """Cluster mode: waits until `node list` shows every cache node up (the gateway's first
    view applied)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = ctx.cluster.cache_states()
        if states and all(s == "up" for s in states.values()):
            return
        time.sleep(0.5)
    ctx.log(f"note: cache nodes not all up after {timeout}s: {ctx.cluster.cache_states()}")


def run(args, seed, work, log):
    base = pick_base_port(args.base_port, args.etcd)
    cluster = Cluster(args, work, base, log)
    ctx = Context(args, seed, cluster, log)
    for name in ("datanode/ringcache-datanode", "cachenode/ringcache-cachenode",
                 "gateway/ringcache-gateway", "tools/ctl/ringcachectl"):
        for d in {cluster.bin, cluster.start_bin}:
            if not os.access(os.path.join(d, name), os.X_OK):
                raise SetupError(f"missing {os.path.join(d, name)} (build it first)")
    mode = (f"cluster mode (etcd on {cluster.etcd_endpoint}, lease {args.lease_ttl}s)"
            if args.etcd else "static mode")
    nemeses = ",".join(args.deck) if args.deck else (
        "remove,kill-data" if args.remove_cache_node else "kill-cache,kill-data")
    log(f"cluster: {mode}, {args.gateways} gateway(s), {args.cache_nodes} cache nodes, "
        f"{args.data_nodes} data nodes, base "
        f"port {base}, binaries {cluster.bin}, dir {cluster.dir}; nemeses {nemeses}")
    if args.old_bin:
        log(f"rolling upgrade: the cluster starts with release {release_of(cluster.start_bin)} "
            f"({cluster.start_bin}), upgrades go to {release_of(cluster.bin)} ({cluster.bin})")
    side = None
    try:
        cluster.up()
        if args.gateways > 1:
            deadline = time.monotonic() + 60
            while cluster.leader() is None:
                if time.monotonic() > deadline:
                    raise SetupError("no coordinator elected among the gateways after 60 s")
                time.sleep(0.2)
            log(f"gateway {cluster.leader()} is the coordinator")
        if args.etcd:
            wait_all_up(ctx)
        if "lose-etcd" in (args.deck or []):
            # Before the VDIs exist: the first restore must find them on the data nodes.
            take_etcd_backup(ctx)
        states = []
        for i, n in enumerate(args.replication_list):
            name = f"fault-r{n}" + (f"-{i}" if args.replication_list.count(n) > 1 else "")
            r = cluster.ctl("vdi", "create", name, "--size", str(args.vdi_bytes),
                            "--replication", str(n))
            if r.returncode != 0:
                raise SetupError(f"ringcachectl vdi create {name}: {r.stderr.strip()}")
            log(r.stdout.strip())
            states.append(VdiState(name, i + 1, n, args.vdi_bytes))
        if args.tls:
            check_tls_enforced(cluster, states[0].name, log)
        if args.side_load:
            side = SideLoad(ctx, args.side_load)

        rng = random.Random(seed)
        nemesis = Nemesis(ctx, rng)
        verified = set()
        phases = len(states)
        try:
            for i, st in enumerate(states):
                share = args.faults // phases + (1 if i < args.faults % phases else 0)
                run_phase(ctx, st, share, args.duration / phases, nemesis, rng)
                check_daemons(ctx)
                # Every VDI written so far, again after this phase's faults.
                for done in states[:i + 1]:
                    verify(ctx, done, f"after phase {st.name}")
                    verified.add(done.name)
                if ctx.abort.is_set():
                    break
            if args.old_bin and not ctx.abort.is_set():
                finalize_upgrade(ctx, states[0].name)
            if not ctx.abort.is_set() and not args.no_flush:
                log("ringcachectl flush (destage every dirty block), then verify again")
                t = time.monotonic()
                r = cluster.ctl("flush", timeout=400)
                if r.returncode != 0:
                    ctx.problem(f"ringcachectl flush failed: {(r.stderr or r.stdout).strip()}")
                else:
                    log(f"flush done in {time.monotonic() - t:.1f}s")
                    for st in states:
                        verify(ctx, st, "after flush")
            check_daemons(ctx)
        except subprocess.TimeoutExpired as e:
            # What it printed so far (a flush reports each cache node it finished).
            out = e.stdout or b""
            out = (out.decode(errors="replace") if isinstance(out, bytes) else out).strip()
            said = "; its output: " + " | ".join(out.splitlines()[-5:]) if out else ""
            ctx.problem(f"{' '.join(e.cmd)} did not finish in {e.timeout:.0f}s{said}")
        except (DaemonError, SetupError) as e:
            ctx.problem(str(e))
        if side is not None:
            side.stop()
        blocks_verified = sum(sum(1 for v in st.next_version if v) for st in states
                              if st.name in verified)
        refusals, dn = cluster.metric_sum("datanode", "ringcache_datanode_older_version_refusals_total")
        fenced, cn = cluster.metric_sum("cachenode", "ringcache_cachenode_fenced_requests_total")
        cluster.down()
        for name, line in cluster.sanitizer_reports():
            ctx.problems.append(f"sanitizer report in {name}: {line}")
        lost, stale = ctx.count("lost"), ctx.count("stale")
        with ctx.mu:  # of the lost blocks, those read back as zeros after an acknowledged write
            zeros = sum(1 for v in ctx.bad.values() if v.get("lost", (None, None))[1] == "zeros")

        print(f"seed: {seed}")
        print(f"writes acknowledged: {ctx.acked}")
        print(f"faults injected: {len(ctx.faults)}")
        print(f"blocks verified: {blocks_verified}")
        print(f"blocks lost: {lost}")
        print(f"blocks stale: {stale}")
        print(f"blocks zeroed: {zeros}")
        print(f"nemeses: {' '.join(f'{k}={ctx.kinds[k]}' for k in NEMESES if ctx.kinds[k])}")
        if ctx.takeovers:
            print(f"coordinator takeovers: {len(ctx.takeovers)}, seconds from kill -9 to the "
                  f"next election: max {max(ctx.takeovers):.1f}, mean "
                  f"{sum(ctx.takeovers) / len(ctx.takeovers):.1f} (lease {args.lease_ttl}s)")
        print(f"fault_test: acknowledged={ctx.acked} faults={len(ctx.faults)} "
              f"verified={blocks_verified} lost={lost} stale={stale} zeros={zeros}", flush=True)
        log(f"{ctx.failed} writes answered with an error or abandoned ({ctx.abandoned} abandoned "
            f"by the client), {ctx.reads} reads verified during the run ({ctx.sweep_reads} "
            f"sweeps), {sum(ctx.bad_reads.values())} of all reads found bad blocks; longest "
            f"request {ctx.longest:.1f}s, {ctx.slow} over 30s; older-version refusals at the "
            f"data nodes {refusals} ({dn} answered), fenced requests at the cache nodes {fenced} "
            f"({cn} answered; counters since each daemon's last start)")
        ok = True
        if lost:
            ok = False
            print("FAIL: blocks lost (first ones):")
            print("\n".join(describe_bad(ctx, "lost")))
        if stale:
            ok = False
            print("FAIL: stale blocks (first ones):")
            print("\n".join(describe_bad(ctx, "stale")))
        print(f"longest gap between two acknowledged writes of a writer: {ctx.ack_gap:.1f}s "
              f"(lease {args.lease_ttl}s)")
        if side is not None:
            print(f"side load: {side.summary()}")
        if args.no_write_errors and ctx.failed:
            ok = False
            print(f"FAIL: {ctx.failed} writes answered with an error or abandoned "
                  "(--no-write-errors)")
        if not args.duration and len(ctx.faults) < args.faults:
            ok = False
            print(f"FAIL: {len(ctx.faults)} faults injected, {args.faults} requested")
        for p in ctx.problems:
            ok = False
            print(f"FAIL: {p}")
        if not ok:
            rest, skip = [], False
            for a in sys.argv[1:]:
                if not skip and not a.startswith("--seed"):
                    rest.append(a)
                skip = a == "--seed"
            print(f"replay: tests/fault/fault_test.py --seed {seed} {' '.join(rest)}")
        return 0 if ok else 1
    finally:
        if side is not None:
            side.stop()
        cluster.down()


def main(argv):
    args = parse_args(argv)
    if args.etcd:
        missing = [t for t in ("etcd", "etcdctl") if shutil.which(t) is None]
        if missing:
            print(f"fault_test.py: --etcd needs {' and '.join(missing)} (etcd-server, "
                  "etcd-client): skipping")
            return 77
    import_nbd()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    log = Log()
    plan = f"{args.duration:.0f}s of faults" if args.duration else f"{args.faults} faults"
    log(f"fault_test.py seed {seed} (replay with --seed {seed}), {plan}, "
        f"replications {args.replication_list}{', cluster mode' if args.etcd else ''}")
    parent = args.work_dir or os.environ.get("TEST_TMPDIR") or None
    work = tempfile.mkdtemp(prefix="rc-fault.", dir=parent)

    def on_signal(signum, _frame):
        raise SystemExit(f"fault_test.py: signal {signum}, tearing down")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    rc = 1
    try:
        rc = run(args, seed, work, log)
        log(f"done: {'PASS' if rc == 0 else 'FAIL'}")
        return rc
    except SetupError as e:
        print(f"fault_test.py: {e}", file=sys.stderr)
        rc = 2
        return rc
    except subprocess.TimeoutExpired as e:
        print(f"fault_test.py: FAIL: {' '.join(e.cmd)} did not finish in {e.timeout:.0f}s",
              file=sys.stderr)
        return rc
    finally:
        if args.keep:
            print(f"kept {work}")
        elif rc != 0:  # a failure or a failed setup: the logs, not the daemons' data
            for d in ("state", "etcd"):
                shutil.rmtree(os.path.join(work, "cluster", d), ignore_errors=True)
            print(f"kept the logs: {os.path.join(work, 'cluster', 'logs')}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
