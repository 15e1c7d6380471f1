#!/usr/bin/env python3
"""Fault-injection checker for a ringcache cluster (issue 6 §4 "Proof").

Starts a cluster of separate processes with deploy/cluster.sh (3 cache nodes, 4 data nodes) in a
fresh temporary directory on its own ports, creates one VDI per replication factor (default 2 and
3), and runs one phase per VDI: several writer threads, each with its own NBD connection and its
own disjoint set of 4 KiB blocks, write versioned blocks (a header naming the VDI, the block and
the block's version, then a pattern derived from the header and the seed) with occasional
multi-block writes across 4 MiB object boundaries and occasional reads verified on the spot,
while the main thread kills -9 a random cache node or up to N-1 data nodes at random moments and
restarts them after a short random delay. Per block it records the last acknowledged version and
every version that was sent but answered with an error or never answered; a failed write is
retried half a second later with new versions.

At the end of every phase, and again after `ringcachectl flush` destaged everything, it reads
every block of every VDI: a written block must hold its last acknowledged version or one of the
later unacknowledged ones (never an older version, never garbage, never zeros once a version was
acknowledged); a block never written must read as zeros. It prints

    writes acknowledged: X
    faults injected: Y
    blocks verified: Z
    blocks lost: W

and exits 1 if W > 0, Y is short of --faults, a read during the run returned wrong data, a daemon
died without being killed, or a sanitizer reported an error in a daemon log (the first few bad
blocks are named with expected and found versions and the faults since their last
acknowledgement); exit 2 on bad usage or a cluster that does not start.

Every random choice of the fault schedule comes from --seed (printed at the start), so a failing
schedule can be replayed; the interleaving of writers and faults is timing-dependent.

A request the gateway holds while a cache node restarts is simply waited for (--io-timeout); one
that errors counts as unacknowledged. A request that times out on the client side is abandoned
with its connection, counted as unacknowledged, and its blocks are not written again (the server
may still apply it at any later time).

Needs the `nbd` module of Debian's python3-libnbd; when the running interpreter lacks it, the
script re-executes itself with /usr/bin/python3. Standard library otherwise.

Usage:
    tests/fault/fault_test.py --bin BUILD_DIR [--seed S] [--faults 24] [--remove-cache-node] ...
    (ctest: FaultInjection.cluster; ASan: --bin build-asan)
"""

import argparse
import collections
import hashlib
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

BLOCK = 4096
OBJECT = 4 << 20
BLOCKS_PER_OBJECT = OBJECT // BLOCK
CHUNK = 16  # blocks of one ownership chunk; chunks are shifted by CHUNK/2 to straddle objects
MAGIC = b"RCFAULT1"
HEADER = struct.Struct("<8sQQQQ")  # magic, VDI tag, block, version, seed
ZERO_BLOCK = bytes(BLOCK)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

nbd = None  # the libnbd module, imported after argument parsing so --help works anywhere


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().replace("IB", "").replace("B", "")
    num = t.rstrip("KMG")
    return int(float(num) * units[t[len(num):]])


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="fault_test.py",
        description=__doc__.split("\n\n")[0] + " Kills cache and data nodes under a versioned "
        "write load and checks that no acknowledged write is lost.",
        epilog="Output: 'writes acknowledged: X', 'faults injected: Y', 'blocks verified: Z', "
        "'blocks lost: W'. Exit 0 pass, 1 check failed, 2 usage or set-up error. Example: "
        "tests/fault/fault_test.py --bin build --seed 42",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin", default=os.environ.get("RINGCACHE_BIN", os.path.join(ROOT, "build")),
                   help="build directory holding the daemons and ringcachectl (RINGCACHE_BIN); "
                   "e.g. build-asan for the sanitizer build")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of every random choice (default: a fresh one, printed)")
    p.add_argument("--faults", type=int, default=24,
                   help="faults to inject in total, split evenly over the phases")
    p.add_argument("--replications", default="2,3",
                   help="one VDI and one phase per replication factor N (comma list); each fault "
                   "of phase N kills one cache node or 1..N-1 data nodes")
    p.add_argument("--cache-nodes", type=int, default=3)
    p.add_argument("--data-nodes", type=int, default=4)
    p.add_argument("--vdi-size", default="256MiB", help="size of each VDI")
    p.add_argument("--ssd-size", default="32MiB",
                   help="SSD tier of each cache node (smaller than the data written, so eviction, "
                   "destage and read misses to the data nodes happen under the faults)")
    p.add_argument("--ram-size", default="8MiB", help="RAM tier of each cache node")
    p.add_argument("--writers", type=int, default=6, help="writer threads (NBD connections)")
    p.add_argument("--depth", type=int, default=4, help="requests in flight per writer")
    p.add_argument("--cache-fault-share", type=float, default=0.5,
                   help="probability that a fault hits a cache node rather than data nodes")
    p.add_argument("--max-down", type=float, default=3.0,
                   help="a killed daemon stays down for uniform(0.2, this) seconds")
    p.add_argument("--max-gap", type=float, default=4.0,
                   help="time between a restart and the next kill is uniform(0.5, this) seconds")
    p.add_argument("--io-timeout", type=float, default=300.0,
                   help="seconds before the client abandons a request (the gateway itself waits "
                   "up to 60 s for a restarting cache node)")
    p.add_argument("--remove-cache-node", action="store_true",
                   help="remove a killed cache node with `ringcachectl node remove` instead of "
                   "restarting it (its write-back log is replayed home) and go on with the rest; "
                   "one cache node always stays, later cache faults hit data nodes instead")
    p.add_argument("--no-flush", action="store_true",
                   help="skip the final `ringcachectl flush` and the verification after it")
    p.add_argument("--base-port", type=int, default=0,
                   help="first port of the cluster (cluster.sh --base-port; default: a free range)")
    p.add_argument("--work-dir", default=None,
                   help="parent of the temporary directory (default $TEST_TMPDIR or /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the cluster's directory and logs")
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
    if a.writers < 1 or a.depth < 1 or a.faults < 0 or a.cache_nodes < 1:
        p.error("--writers, --depth, --cache-nodes must be positive, --faults not negative")
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
        self.env = dict(os.environ, RINGCACHE_BIN=self.bin)
        self.script = os.path.join(ROOT, "deploy", "cluster.sh")
        self.ctl_bin = os.path.join(self.bin, "tools", "ctl", "ringcachectl")
        self.admin = f"127.0.0.1:{base + 10}"
        self.nbd_port = base + 9
        self.is_up = False

    def sh(self, *argv, timeout=180):
        return subprocess.run(["bash", self.script, *argv, "--dir", self.dir], env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)

    def up(self):
        a = self.args
        self.is_up = True
        r = self.sh("up", "--base-port", str(self.base), "--cache-nodes", str(a.cache_nodes),
                    "--data-nodes", str(a.data_nodes), "--ssd-size", a.ssd_size, "--ram-size",
                    a.ram_size)
        if r.returncode != 0:
            raise SetupError(f"cluster.sh up failed:\n{r.stdout}{r.stderr}")

    def kill(self, role, ids):
        r = self.sh("kill", role, *map(str, ids))
        if r.returncode != 0:
            raise SetupError(f"cluster.sh kill {role} {ids} failed: {r.stdout}{r.stderr}")

    def start(self, role, ids):
        r = self.sh("start", role, *map(str, ids))
        if r.returncode != 0:
            raise DaemonError(f"cluster.sh start {role} {ids} failed: {r.stdout}{r.stderr}")

    def down_members(self):
        """Returns [(role, id)] of the daemons that are not running."""
        r = self.sh("status")
        return [(line.split()[0], int(line.split()[1].rstrip(":")))
                for line in r.stdout.splitlines() if line.endswith(": down")]

    def down(self):
        if self.is_up:
            self.sh("down", timeout=120)
            self.is_up = False

    def ctl(self, *argv, timeout=120):
        return subprocess.run([self.ctl_bin, "--gateway", self.admin, *argv],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)

    def log_path(self, role, node_id):
        return os.path.join(self.dir, "logs", f"{role}-{node_id}.log")

    def tail(self, role, node_id, n=15):
        try:
            with open(self.log_path(role, node_id), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)\n"

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


class SetupError(Exception):
    pass


class DaemonError(Exception):
    pass


def pick_base_port(requested):
    """Returns a base port whose cluster ports are all free on 127.0.0.1 (below the ephemeral
    range), or `requested` when given."""
    if requested:
        return requested
    rng = random.SystemRandom()
    offsets = [9, 10, 11] + [o + i for o in (100, 200, 300, 400) for i in range(1, 10)]
    for _ in range(50):
        base = 21000 + 500 * rng.randrange(0, 22) + 50 * rng.randrange(0, 9)
        try:
            for off in offsets:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + off))
            return base
        except OSError:
            continue
    raise SetupError("no free port range found")


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
        self.abandoned = set()                   # blocks of client-side timeouts: never rewritten

    def expected(self, b):
        la = self.last_acked[b]
        later = [v for v in self.unacked.get(b, ()) if v > la]
        text = f"v{la}" if la else "zeros"
        return text + (f" or unacked {','.join(f'v{v}' for v in later)}" if later else "")

    def judge(self, seed, b, data):
        """Returns None when block b's data is allowed, else what was found."""
        la = self.last_acked[b]
        if data == ZERO_BLOCK:
            return None if la == 0 else "zeros"
        magic, tag, blk, ver, s = HEADER.unpack_from(data)
        if magic != MAGIC or s != seed:
            return "garbage"
        if tag != self.tag or blk != b:
            return f"the data of VDI {tag} block {blk} v{ver}"
        if data != block_data(seed, tag, blk, ver):
            return f"corrupt v{ver}"
        if self.next_version[b] == 0:
            return f"v{ver} of a block never written"
        unacked = self.unacked.get(b, ())
        if ver == la or (ver > la and ver in unacked):
            return None
        if ver < la:
            return f"older v{ver} ({'unacknowledged' if ver in unacked else 'acknowledged'})"
        return f"v{ver}, acknowledged later than v{la}?"


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
    __slots__ = ("kind", "first", "versions", "buf", "t")

    def __init__(self, kind, first, versions, buf):
        self.kind, self.first, self.versions, self.buf = kind, first, versions, buf
        self.t = time.monotonic()

    @property
    def count(self):
        return len(self.versions)


class Writer(threading.Thread):
    """One NBD connection writing and reading its own chunks of one VDI."""

    P_READ, P_MULTI, P_BOUNDARY, P_HOT = 0.10, 0.15, 0.35, 0.6

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
        self.acked = self.failed = self.abandoned = self.reads = self.read_errors = 0
        self.reconnects = 0
        self.stall_max = 0.0

    def write_op(self, a, n):
        """Returns a write of blocks [a, a+n), each at its next version, or None if one of them
        is busy or abandoned."""
        st, versions, parts = self.state, [], []
        blocks = range(a, a + n)
        if any(b in self.busy or b in st.abandoned for b in blocks):
            return None
        for b in blocks:
            st.next_version[b] += 1
            versions.append(st.next_version[b])
            parts.append(block_data(self.ctx.seed, st.tag, b, st.next_version[b]))
        return Op("write", a, versions, nbd.Buffer.from_bytearray(b"".join(parts)))

    # REQUIRES: the blocks of the result are not busy and (for writes) not abandoned.
    def next_op(self):
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
                return Op("read", a, [0] * n, nbd.Buffer(n * BLOCK))
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
        deadline = time.monotonic() + 60
        while True:
            try:
                h = nbd.NBD()
                h.connect_uri(f"nbd://127.0.0.1:{self.ctx.cluster.nbd_port}/{self.state.name}")
                return h
            except nbd.Error as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cannot connect to the gateway: {e}") from e
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
            data = op.buf.to_bytearray()
            for i, b in enumerate(blocks):
                found = st.judge(self.ctx.seed, b, bytes(data[i * BLOCK:(i + 1) * BLOCK]))
                if found is not None:
                    self.ctx.read_mismatch(st, b, found)
            return
        if ok:
            self.acked += 1
            now = self.ctx.log.now()
            for b, v in zip(blocks, op.versions):
                st.last_acked[b] = v
                st.acked_at[b] = now
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
        while True:
            stopping = ctx.stop_writers.is_set()
            if stopping and not inflight:
                break
            broken = False
            while not stopping and len(inflight) < ctx.args.depth:
                op = self.next_op()
                if op is None:
                    break
                try:
                    inflight[self.issue(h, op)] = op
                except nbd.Error:
                    self.finish(op, False)
                    broken = True
                    break
            if not inflight and not broken:
                time.sleep(0.01)
                continue
            if not broken:
                try:
                    h.poll(200)
                except nbd.Error:
                    broken = True
            for cookie in list(inflight):
                try:
                    if not h.aio_command_completed(cookie):
                        continue
                    self.finish(inflight.pop(cookie), True)
                except nbd.Error:
                    self.finish(inflight.pop(cookie), False)
            now = time.monotonic()
            timed_out = any(now - op.t > ctx.args.io_timeout for op in inflight.values())
            if broken or timed_out or h.aio_is_dead() or h.aio_is_closed():
                for op in inflight.values():
                    self.finish(op, False, abandoned=True)
                inflight.clear()
                self.reconnects += 1
                ctx.log(f"{self.name}: connection reset ({'timeout' if timed_out else 'error'})")
                del h
                h = self.connect()
        try:
            h.shutdown()
        except nbd.Error:
            pass


# --------------------------------------------------------------------------------------------
# The test.

class Context:
    def __init__(self, args, seed, cluster, log):
        self.args, self.seed, self.cluster, self.log = args, seed, cluster, log
        self.stop_writers = threading.Event()
        self.abort = threading.Event()
        self.mu = threading.Lock()
        self.problems = []          # reasons to fail other than lost blocks
        self.mismatches = []        # (vdi, block, expected, found, time) of reads during the run
        self.faults = []            # (time, phase, description)
        self.acked = self.failed = self.abandoned = self.reads = 0
        self.longest = 0.0          # seconds, the slowest request of any writer
        self.slow = 0               # requests that took over 30 s
        self.removed = set()        # cache nodes removed with --remove-cache-node

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

    def read_mismatch(self, st, b, found):
        with self.mu:
            self.mismatches.append((st.name, b, st.expected(b), found, self.log.now()))
            if len(self.mismatches) <= 5:
                self.log(f"read during the run: {st.name} block {b}: expected "
                         f"{st.expected(b)}, found {found}")

    def sleep(self, seconds):
        """Sleeps unless the test is aborting; returns False when it is."""
        return not self.abort.wait(seconds)


def inject_fault(ctx, rng, phase, max_data):
    """Kills one cache node or 1..max_data data nodes, then restarts (or removes) them."""
    a, c = ctx.args, ctx.cluster
    caches = [i for i in range(1, a.cache_nodes + 1) if i not in ctx.removed]
    removable = a.remove_cache_node and len(caches) > 1
    if rng.random() < a.cache_fault_share and (not a.remove_cache_node or removable):
        role, ids = "cachenode", [rng.choice(caches)]
    elif max_data >= 1:
        role = "datanode"
        ids = sorted(rng.sample(range(1, a.data_nodes + 1), rng.randint(1, max_data)))
    else:
        role, ids = "cachenode", [rng.choice(caches)]
    down = rng.uniform(0.2, a.max_down)
    what = f"{role} {','.join(map(str, ids))}"
    c.kill(role, ids)
    t = ctx.log.now()
    if role == "cachenode" and a.remove_cache_node:
        start = time.monotonic()
        r = c.ctl("node", "remove", str(ids[0]), "--role", "cachenode", timeout=600)
        if r.returncode != 0:
            ctx.faults.append((t, phase, f"kill -9 {what} (removal refused)"))
            ctx.problem(f"ringcachectl node remove {ids[0]} failed: {(r.stderr or r.stdout).strip()}")
            c.start(role, ids)  # so that stalled writers can finish
            return
        ctx.removed.add(ids[0])
        ctx.faults.append((t, phase, f"kill -9 {what}, removed"))
        ctx.log(f"fault {len(ctx.faults)}: kill -9 {what}; removed from the cluster in "
                f"{time.monotonic() - start:.1f}s")
        return
    ctx.sleep(down)
    start = time.monotonic()
    c.start(role, ids)
    ctx.faults.append((t, phase, f"kill -9 {what}, down {down:.1f}s"))
    ctx.log(f"fault {len(ctx.faults)}: kill -9 {what}, down {down:.1f}s, restart took "
            f"{time.monotonic() - start:.1f}s")


def check_daemons(ctx):
    """Restarts daemons that died without being killed and records each as a problem."""
    c = ctx.cluster
    for role, node_id in c.down_members():
        if role == "cachenode" and node_id in ctx.removed:
            continue
        ctx.problem(f"{role} {node_id} died without being killed; log tail:\n"
                    f"{c.tail(role, node_id)}")
        try:
            c.start(role, [node_id])
        except DaemonError as e:
            ctx.problem(str(e))


def run_phase(ctx, state, faults, rng):
    a = ctx.args
    max_data = min(state.replication - 1, a.data_nodes - 1)
    ctx.log(f"phase {state.name} (replication {state.replication}): {a.writers} writers, "
            f"{faults} faults, at most {max_data} data node(s) down at once")
    ctx.stop_writers.clear()
    owned = make_chunks(state, a.writers)
    writers = [Writer(ctx, state, i, owned[i], rng.randrange(1 << 62)) for i in range(a.writers)]
    for w in writers:
        w.start()
    ctx.sleep(2.0)
    for _ in range(faults):
        if not ctx.sleep(rng.uniform(0.5, a.max_gap)):
            break
        try:
            inject_fault(ctx, rng, state.name, max_data)
        except DaemonError as e:
            ctx.problem(str(e))
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
    ctx.longest = max([ctx.longest] + [w.stall_max for w in writers])
    ctx.log(f"phase {state.name}: {acked} writes acknowledged, {failed} failed "
            f"({sum(w.abandoned for w in writers)} abandoned by the client), "
            f"{sum(w.reads for w in writers)} reads verified "
            f"({sum(w.read_errors for w in writers)} failed), "
            f"{sum(w.reconnects for w in writers)} reconnects, longest request "
            f"{max(w.stall_max for w in writers):.1f}s")
    if acked == 0:
        ctx.problem(f"phase {state.name}: no write was acknowledged")


def read_range(h, first, count, timeout):
    """Reads blocks [first, first+count) with a deadline; returns bytes or raises."""
    buf = nbd.Buffer(count * BLOCK)
    cookie = h.aio_pread(buf, first * BLOCK)
    deadline = time.monotonic() + timeout
    while not h.aio_command_completed(cookie):
        if time.monotonic() > deadline:
            raise TimeoutError(f"read of blocks {first}+{count} took over {timeout:.0f}s")
        h.poll(200)
    return bytes(buf.to_bytearray())


def verify(ctx, state, label, bad):
    """Reads every block of the VDI; adds {block: (expected, found)} of bad ones to bad[state]
    (first finding kept) and returns the number of written blocks checked."""
    h = nbd.NBD()
    h.connect_uri(f"nbd://127.0.0.1:{ctx.cluster.nbd_port}/{state.name}")
    step = 256  # 1 MiB reads
    checked = nonzero = 0
    mine = bad.setdefault(state.name, {})
    for first in range(0, state.nblocks, step):
        count = min(step, state.nblocks - first)
        data = None
        for attempt in range(5):
            try:
                data = read_range(h, first, count, ctx.args.io_timeout)
                break
            except (nbd.Error, TimeoutError) as e:
                ctx.log(f"verify {state.name}: read of blocks {first}+{count} failed ({e}); "
                        f"retrying")
                time.sleep(1 + attempt)
                h = nbd.NBD()
                h.connect_uri(f"nbd://127.0.0.1:{ctx.cluster.nbd_port}/{state.name}")
        for i in range(count):
            b = first + i
            written = state.next_version[b] > 0
            checked += written
            if data is None:
                found = "a read error"
            else:
                found = state.judge(ctx.seed, b, data[i * BLOCK:(i + 1) * BLOCK])
            if found is not None:
                nonzero += not written
                mine.setdefault(b, (state.expected(b), found, label))
    h.shutdown()
    ctx.log(f"verify {state.name} ({label}): {checked} written blocks read, "
            f"{len(mine)} bad so far ({nonzero} never-written blocks not zero in this pass)")
    return checked


def describe_bad(ctx, states, bad, limit=10):
    lines = []
    for st in states:
        for b, (expected, found, label) in sorted(bad.get(st.name, {}).items()):
            if len(lines) >= limit:
                return lines
            acked_at = st.acked_at[b]
            since = [f"{d} at {t:.1f}s" for t, _, d in ctx.faults if t >= acked_at]
            when = f"last ack at {acked_at:.1f}s" if st.last_acked[b] else "never acknowledged"
            lines.append(f"  {st.name} block {b} (object {b // BLOCKS_PER_OBJECT}, offset "
                         f"{b * BLOCK}): expected {expected}, found {found} [{label}; {when}; "
                         f"faults since: {'; '.join(since[:4]) or 'none'}"
                         f"{' ...' if len(since) > 4 else ''}]")
    return lines


def run(args, seed, work, log):
    base = pick_base_port(args.base_port)
    cluster = Cluster(args, work, base, log)
    ctx = Context(args, seed, cluster, log)
    for name in ("datanode/ringcache-datanode", "cachenode/ringcache-cachenode",
                 "gateway/ringcache-gateway", "tools/ctl/ringcachectl"):
        if not os.access(os.path.join(cluster.bin, name), os.X_OK):
            raise SetupError(f"missing {os.path.join(cluster.bin, name)} (build it first)")
    log(f"cluster: {args.cache_nodes} cache nodes, {args.data_nodes} data nodes, base port "
        f"{base}, binaries {cluster.bin}, dir {cluster.dir}")
    try:
        cluster.up()
        states = []
        for i, n in enumerate(args.replication_list):
            name = f"fault-r{n}" + (f"-{i}" if args.replication_list.count(n) > 1 else "")
            r = cluster.ctl("vdi", "create", name, "--size", str(args.vdi_bytes),
                            "--replication", str(n))
            if r.returncode != 0:
                raise SetupError(f"ringcachectl vdi create {name}: {r.stderr.strip()}")
            log(r.stdout.strip())
            states.append(VdiState(name, i + 1, n, args.vdi_bytes))

        rng = random.Random(seed)
        bad = {}
        verified = set()
        phases = len(states)
        for i, st in enumerate(states):
            share = args.faults // phases + (1 if i < args.faults % phases else 0)
            run_phase(ctx, st, share, rng)
            check_daemons(ctx)
            # Every VDI written so far, again after this phase's faults.
            for done in states[:i + 1]:
                verify(ctx, done, f"after phase {st.name}", bad)
                verified.add(done.name)
            if ctx.abort.is_set():
                break
        if not ctx.abort.is_set() and not args.no_flush:
            log("ringcachectl flush (destage every dirty block), then verify again")
            t = time.monotonic()
            r = cluster.ctl("flush", timeout=400)
            if r.returncode != 0:
                ctx.problem(f"ringcachectl flush failed: {(r.stderr or r.stdout).strip()}")
            else:
                log(f"flush done in {time.monotonic() - t:.1f}s")
                for st in states:
                    verify(ctx, st, "after flush", bad)
        check_daemons(ctx)
        blocks_verified = sum(sum(1 for v in st.next_version if v) for st in states
                              if st.name in verified)
        cluster.down()
        for name, line in cluster.sanitizer_reports():
            ctx.problems.append(f"sanitizer report in {name}: {line}")
        lost = sum(len(v) for v in bad.values())

        print(f"seed: {seed}")
        print(f"writes acknowledged: {ctx.acked}")
        print(f"faults injected: {len(ctx.faults)}")
        print(f"blocks verified: {blocks_verified}")
        print(f"blocks lost: {lost}", flush=True)
        log(f"{ctx.failed} writes answered with an error or abandoned ({ctx.abandoned} abandoned "
            f"by the client), {ctx.reads} reads verified during the run, "
            f"{len(ctx.mismatches)} of them mismatched; longest request {ctx.longest:.1f}s, "
            f"{ctx.slow} over 30s")
        ok = True
        if lost:
            ok = False
            print("FAIL: blocks lost (first ones):")
            print("\n".join(describe_bad(ctx, states, bad)))
        if len(ctx.faults) < args.faults:
            ok = False
            print(f"FAIL: {len(ctx.faults)} faults injected, {args.faults} requested")
        if ctx.mismatches:
            ok = False
            print(f"FAIL: {len(ctx.mismatches)} reads during the run returned wrong data, first:")
            for name, b, exp, found, t in ctx.mismatches[:5]:
                print(f"  {name} block {b} at {t:.1f}s: expected {exp}, found {found}")
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
        cluster.down()


def main(argv):
    args = parse_args(argv)
    import_nbd()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    log = Log()
    log(f"fault_test.py seed {seed} (replay with --seed {seed}), {args.faults} faults, "
        f"replications {args.replication_list}")
    parent = args.work_dir or os.environ.get("TEST_TMPDIR") or None
    work = tempfile.mkdtemp(prefix="rc-fault.", dir=parent)

    def on_signal(signum, _frame):
        raise SystemExit(f"fault_test.py: signal {signum}, tearing down")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        rc = run(args, seed, work, log)
        log(f"done: {'PASS' if rc == 0 else 'FAIL'}")
        return rc
    except SetupError as e:
        print(f"fault_test.py: {e}", file=sys.stderr)
        return 2
    except subprocess.TimeoutExpired as e:
        print(f"fault_test.py: FAIL: {' '.join(e.cmd)} did not finish in {e.timeout:.0f}s",
              file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
