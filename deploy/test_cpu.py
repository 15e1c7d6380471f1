#!/usr/bin/env python3
"""Adds up the CPU each ctest entry uses: its own processes, the daemons it starts (also those
that leave its process tree) and every short-lived client they run, so that deploy/test.sh's
table can say which tests the CPU went to. On two cores the cross-process stage is CPU-bound:
its wall time is the CPU its tests use, and a test's own wall time says little about that.

    deploy/test_cpu.py watch OUT.tsv [--interval S]   until SIGTERM, SIGINT or its parent's
                                                      end, then writes OUT
    deploy/test_cpu.py show OUT.tsv [--top N]         prints the table of a finished watch

How: every test carries RINGCACHE_CTEST=<its name> in its environment (cmake/RingcacheHelpers.cmake;
a googletest binary's tests carry the binary's name), and so does every process it starts. The
watcher looks at each new process every --interval seconds (default 0.5) and moves the ones that
carry the variable, and are not in their test's group yet, into a CPU-accounting control group of
their own test (cgroup v1 `cpuacct`, else cgroup2); their children are born in it, and the kernel
counts the CPU of every process of the group, also after it ended. Docker's containers keep
Docker's groups: their CPU is a line of its own. Needs root and a cgroup hierarchy it may write;
without them it says so and exits 0 (the table then has no CPU column).

Within a test's group each program (a process's name: ringcache-datan, python3, etcd, bash)
has one; a process that lives less than the interval stays in its parent's. OUT has one line
per test, NAME<TAB>CPU_SECONDS, each followed by its programs' lines,
NAME<TAB>PROGRAM<TAB>CPU_SECONDS, and two more: `(docker containers)` and `(machine)` (all CPU
of the machine while the watch ran, from /proc/stat).
"""

import argparse
import os
import re
import signal
import sys
import time

DOCKER = "(docker containers)"
MACHINE = "(machine)"
VAR = b"RINGCACHE_CTEST="


def machine_cpu_seconds():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


class Hierarchy:
    """A cgroup hierarchy that counts CPU: v1 `cpuacct`, else cgroup2."""

    def __init__(self):
        self.mount, self.v1 = None, False
        v2 = None
        with open("/proc/mounts") as f:
            for line in f:
                dev, path, kind, opts = line.split()[:4]
                if kind == "cgroup" and "cpuacct" in opts.split(","):
                    self.mount, self.v1 = path, True
                elif kind == "cgroup2":
                    v2 = path
        if self.mount is None:
            self.mount = v2

    def usage_seconds(self, group):
        try:
            if self.v1:
                with open(os.path.join(group, "cpuacct.usage")) as f:
                    return int(f.read()) / 1e9
            with open(os.path.join(group, "cpu.stat")) as f:
                for line in f:
                    k, v = line.split()
                    if k == "usage_usec":
                        return int(v) / 1e6
        except OSError:
            pass
        return None

    def group_of(self, pid):
        """The process's group in this hierarchy, relative to its mount, or None."""
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                for line in f:
                    _, controllers, path = line.rstrip("\n").split(":", 2)
                    if (self.v1 and "cpuacct" in controllers.split(",")) or \
                            (not self.v1 and controllers == ""):
                        return path
        except OSError:
            pass
        return None


def safe(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200] or "_"


def identity(pid):
    """(start time, program name) of a process: a pid used again, or a process that ran exec,
    is looked at again. None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        return s[s.rfind(")") + 2:].split()[19], s[s.find("(") + 1:s.rfind(")")]
    except OSError:
        return None


def test_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(VAR):
            return item[len(VAR):].decode(errors="replace")
    return None


def watch(out, interval):
    h = Hierarchy()
    if h.mount is None or os.geteuid() != 0:
        print("test_cpu: no cgroup hierarchy to count CPU in (or not root): no CPU per test",
              file=sys.stderr)
        return 0
    root = os.path.join(h.mount, f"ringcache-test-{os.getpid()}")
    try:
        os.mkdir(root)
    except OSError as e:
        print(f"test_cpu: cannot make {root}: {e}: no CPU per test", file=sys.stderr)
        return 0
    docker = os.path.join(h.mount, "docker")
    docker0 = h.usage_seconds(docker) or 0.0
    machine0 = machine_cpu_seconds()
    groups = {}    # test name -> its group's directory
    programs = {}  # (test name, program) -> the group of the test's processes of that program
    seen = {}      # pid -> identity() when last looked at
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    parent = os.getppid()
    while not stop and os.getppid() == parent:  # ends with deploy/test.sh, also when killed
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or entry == str(os.getpid()):
                continue
            ident = identity(entry)
            if ident is None or seen.get(entry) == ident:
                continue
            seen[entry] = ident
            name = test_of(entry)
            if name is None:
                continue
            try:  # a group the kernel refuses leaves that process uncounted, not the run
                if name not in groups:
                    os.makedirs(os.path.join(root, safe(name)), exist_ok=True)
                    groups[name] = os.path.join(root, safe(name))
                group = programs.get((name, ident[1]))
                if group is None:
                    group = os.path.join(groups[name], "program." + safe(ident[1]))
                    os.makedirs(group, exist_ok=True)
                    programs[(name, ident[1])] = group
            except OSError:
                continue
            now = h.group_of(entry)
            if now is None or now == "/" + os.path.relpath(group, h.mount) or "docker" in now:
                continue
            try:
                with open(os.path.join(group, "cgroup.procs"), "w") as f:
                    f.write(entry)
            except OSError:
                pass  # gone meanwhile
        # forget the pids that ended, so that a long run's table stays small
        if len(seen) > 20000:
            alive = set(os.listdir("/proc"))
            seen = {p: s for p, s in seen.items() if p in alive}
        time.sleep(interval)

    rows = [(name, h.usage_seconds(g) or 0.0) for name, g in groups.items()]
    docker_s = (h.usage_seconds(docker) or docker0) - docker0
    machine_s = machine_cpu_seconds() - machine0
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        for name, secs in sorted(rows, key=lambda r: -r[1]):
            f.write(f"{name}\t{secs:.1f}\n")
            for (test, program), g in sorted(programs.items()):
                if test == name:
                    f.write(f"{name}\t{program}\t{h.usage_seconds(g) or 0.0:.1f}\n")
        f.write(f"{DOCKER}\t{max(docker_s, 0.0):.1f}\n{MACHINE}\t{machine_s:.1f}\n")
    os.replace(tmp, out)

    # Leave no group behind: what still runs in one goes back to the hierarchy's root group.
    for g in list(programs.values()) + list(groups.values()):
        try:
            with open(os.path.join(g, "cgroup.procs")) as f:
                left = f.read().split()
            for pid in left:
                try:
                    with open(os.path.join(h.mount, "cgroup.procs"), "w") as f:
                        f.write(pid)
                except OSError:
                    pass
            os.rmdir(g)
        except OSError:
            pass
    try:
        os.rmdir(root)
    except OSError:
        pass
    return 0


def read(path, programs=None):
    """{name: CPU seconds} of a finished watch, or {} when there is none; with `programs` (a
    dict), also {name: {program: CPU seconds}} into it."""
    rows = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 2:
                    rows[parts[0]] = float(parts[1])
                elif len(parts) == 3 and programs is not None:
                    programs.setdefault(parts[0], {})[parts[1]] = float(parts[2])
    except (OSError, ValueError):
        return {}
    return rows


def fmt(seconds):
    m, s = divmod(int(round(seconds)), 60)
    return f"{m:d}:{s:02d}"


def show(path, top):
    progs = {}
    rows = read(path, progs)
    if not rows:
        return
    machine = rows.pop(MACHINE, 0.0)
    docker = rows.pop(DOCKER, 0.0)
    in_tests = sum(rows.values())
    ranked = sorted(rows.items(), key=lambda r: -r[1])
    print(f"  CPU (m:ss): {fmt(in_tests + docker)} in the tests and their containers, of "
          f"{fmt(machine)} the machine used meanwhile; the {min(top, len(ranked))} tests that "
          f"used most, and their programs that used most (a program's short-lived children "
          f"count as its own):")
    for name, secs in ranked[:top]:
        share = 100.0 * secs / machine if machine > 0 else 0.0
        split = sorted(progs.get(name, {}).items(), key=lambda r: -r[1])[:4]
        print(f"  {fmt(secs):>7}  {name:<40} {share:4.1f}%  " +
              ", ".join(f"{p} {fmt(v)}" for p, v in split))
    if docker > 0 and machine > 0:
        print(f"  {fmt(docker):>7}  {DOCKER:<40} {100.0 * docker / machine:4.1f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    w.add_argument("out")
    w.add_argument("--interval", type=float, default=0.5)
    s = sub.add_parser("show")
    s.add_argument("out")
    s.add_argument("--top", type=int, default=10)
    a = p.parse_args()
    if a.cmd == "watch":
        return watch(a.out, a.interval)
    show(a.out, a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
