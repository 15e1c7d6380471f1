"""A network cut between processes of one host, for the fault checker's partition nemesis.

Every daemon of a fault run listens on 127.0.0.1, so addresses cannot tell one process from
another. A cut therefore matches the sender: each process to cut is moved into a cgroup v2 group
of its own, and an iptables rule rejects (TCP reset) every packet that group sends over loopback
to the given ports. A socket keeps the cgroup it was created in, so the connections the process
already holds are cut by rules of their own, on their two port numbers (found with `ss -p`):
both break at once, and every new connection comes from the group. heal() deletes the rules
and moves the processes back where they were. Needs root, iptables with the cgroup match, and a
cgroup2 hierarchy (pure or hybrid mode).
"""
import os
import re
import shutil
import subprocess

SS_LINE = re.compile(r"\S+:(\d+)\s+\S+:(\d+)\s.*pid=(\d+),")


def cgroup2_root():
    """Where the cgroup2 hierarchy is mounted, or None."""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1]
    except OSError:
        pass
    return None


def unsupported():
    """None when cuts work here, else why not (a sentence)."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("iptables", "iptables-restore", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    root = cgroup2_root()
    if root is None:
        return "no cgroup2 hierarchy is mounted"
    probe = os.path.join(root, f"rc-cut-probe-{os.getpid()}")
    rule = ["OUTPUT", "-o", "lo", "-p", "tcp", "--dport", "9", "-m", "cgroup", "--path",
            os.path.basename(probe), "-j", "REJECT", "--reject-with", "tcp-reset"]
    try:
        os.makedirs(probe, exist_ok=True)
        r = subprocess.run(["iptables", "-w", "5", "-I", *rule], capture_output=True, text=True)
        if r.returncode != 0:
            return f"iptables cannot match a cgroup: {r.stderr.strip()}"
        subprocess.run(["iptables", "-w", "5", "-D", *rule], capture_output=True)
        return None
    except FileNotFoundError:
        return "iptables is not installed"
    except OSError as e:
        return f"cannot make a cgroup under {root}: {e}"
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


def _cgroup_of(pid):
    """The process's cgroup2 path (relative to the hierarchy's root), or "/"."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip() or "/"
    return "/"


class LoopbackCut:
    def __init__(self, tag):
        self.root = cgroup2_root()
        self.tag = tag
        self.rules = []
        self.moved = []  # (group dir, pid, the cgroup it came from)

    def cut(self, cuts):
        """For each (pid, ports) of `cuts`: rejects every TCP packet process `pid` sends over
        loopback to `ports`. All rules take effect at once (one iptables-restore transaction):
        no connection of a cut pair keeps working while another one already broke."""
        rules = []
        for pid, ports in cuts:
            group = f"{self.tag}-{pid}"
            path = os.path.join(self.root, group)
            os.makedirs(path, exist_ok=True)
            came_from = _cgroup_of(pid)
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(pid))
            self.moved.append((path, pid, came_from))
            rules.append(["-o", "lo", "-p", "tcp", "-m", "multiport", "--dports",
                          ",".join(str(p) for p in ports), "-m", "cgroup", "--path", group])
        # The connections they hold already: each by its local and remote port.
        listed = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True, check=True)
        for line in listed.stdout.splitlines():
            m = SS_LINE.search(line)
            if m and any(int(m.group(3)) == pid and int(m.group(2)) in ports
                         for pid, ports in cuts):
                rules.append(["-o", "lo", "-p", "tcp", "--sport", m.group(1), "--dport",
                              m.group(2)])
        rules = [r + ["-j", "REJECT", "--reject-with", "tcp-reset"] for r in rules]
        self._restore("-I", rules)
        self.rules.extend(rules)

    def _restore(self, op, rules):
        text = "*filter\n" + "".join(f"{op} OUTPUT {' '.join(r)}\n" for r in rules) + "COMMIT\n"
        subprocess.run(["iptables-restore", "-w", "5", "--noflush"], input=text, text=True,
                       check=True, capture_output=True)

    def heal(self):
        """Removes every rule and group of this cut (processes that died meanwhile included)."""
        if self.rules:
            try:
                self._restore("-D", self.rules)
            except subprocess.CalledProcessError:  # one at a time: delete what is there
                for rule in self.rules:
                    subprocess.run(["iptables", "-w", "5", "-D", "OUTPUT", *rule],
                                   capture_output=True)
        self.rules = []
        for path, pid, came_from in self.moved:
            try:
                with open(os.path.join(self.root, came_from.lstrip("/"), "cgroup.procs"),
                          "w") as f:
                    f.write(str(pid))
            except OSError:
                pass  # the process is gone (killed by another fault or the teardown)
            try:
                os.rmdir(path)
            except OSError:
                pass
        self.moved = []
