#!/usr/bin/env python3
"""Hostile clients against a running TLS cluster (tests/e2e/hostile_test.sh starts it).

Every attempt is something a client that lies, floods or holds the wrong certificate could try;
each must be refused. Attempts run with raw sockets and Python's ssl module, so that nothing a
real client library checks on our behalf hides a hole. Prints one line per attempt and then
`security: tried=N refused=N`; exits 1 unless every attempt was refused.

  hostile_clients.py --tls T --nbd PORT --admin PORT --etcd HOST:PORT --data-port PORT
                     --cache-grpc PORT --data-grpc PORT --gateway-pid PID --export NAME
                     --marker-offset N --marker-byte B

T holds the certificate directories: client (on the export's list), bob (a client of the
cluster's CA not on it), expired (on the list, but expired), other (a client-0 of another CA),
cachenode-1, gateway-1, admin. The export's block at --marker-offset holds --marker-byte
(written by the caller); truncated writes must leave it so. The 4 KiB at --slow-offset get a
write whose payload never finishes; the caller checks that they stay zeros.
"""

import argparse
import os
import select
import selectors
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

NBD_MAGIC = b"NBDMAGIC"
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x3E889045565A9
OPT_ABORT, OPT_STARTTLS, OPT_GO = 2, 5, 7
REP_ACK, REP_INFO = 1, 3
REP_ERR = 1 << 31
REQUEST_MAGIC, SIMPLE_REPLY_MAGIC = 0x25609513, 0x67446698
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2


class Refused(Exception):
    """The server refused: the reason."""


class Served(Exception):
    """The server did what it must not: what."""


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise Refused(f"connection closed after {len(buf)} of {n} bytes")
        buf += part
    return buf


def tls_context(holder=None, tls_root=None, verify_server=True):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if verify_server:
        ctx.load_verify_locations(os.path.join(tls_root, "client", "ca-cert.pem"))
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if holder:
        d = os.path.join(tls_root, holder)
        ctx.load_cert_chain(os.path.join(d, "cert.pem"), os.path.join(d, "key.pem"))
    return ctx


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Nbd:
    """A raw NBD client: the handshake step by step, so that each step can lie."""

    def __init__(self, port, timeout=15):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        greeting = recv_exact(self.sock, 18)
        if greeting[:8] != NBD_MAGIC:
            raise Served(f"bad greeting {greeting!r}")
        self.sock.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes

    def option(self, opt, data=b""):
        self.sock.sendall(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)

    def reply(self):
        magic, opt, kind, length = struct.unpack(">QIII", recv_exact(self.sock, 20))
        if magic != REPLY_MAGIC:
            raise Served(f"bad option reply magic {magic:x}")
        return opt, kind, recv_exact(self.sock, length)

    def starttls(self, ctx):
        self.option(OPT_STARTTLS)
        _, kind, _ = self.reply()
        if kind != REP_ACK:
            raise Refused(f"STARTTLS answered {kind:#x}")
        try:
            self.sock = ctx.wrap_socket(self.sock)
        except (ssl.SSLError, OSError) as e:
            raise Refused(f"TLS handshake failed: {e}") from e

    def go(self, export):
        name = export.encode()
        self.option(OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
        while True:
            try:
                _, kind, data = self.reply()
            except (ssl.SSLError, ConnectionError) as e:
                raise Refused(f"connection ended during GO: {e}") from e
            if kind == REP_ACK:
                return
            if kind & REP_ERR:
                raise Refused(f"GO answered error {kind - REP_ERR} ({data.decode(errors='replace')!r})")
            if kind != REP_INFO:
                raise Served(f"GO answered {kind:#x}")

    def request(self, cmd, offset, length, payload=b"", handle=7):
        self.sock.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, cmd, handle, offset, length)
                          + payload)

    def simple_reply(self):
        magic, error, handle = struct.unpack(">IIQ", recv_exact(self.sock, 16))
        if magic != SIMPLE_REPLY_MAGIC:
            raise Served(f"bad reply magic {magic:x}")
        return error, handle

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class BioTls:
    """TLS over a socket through memory BIOs: the test decides when each encrypted byte leaves,
    so one TLS record can be sent a byte at a time."""

    def __init__(self, sock, ctx):
        self.sock, self.inc, self.out = sock, ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out)
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.flush()
                self.fill()
        self.flush()

    def fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise Refused("connection closed")
        self.inc.write(chunk)

    def flush(self):
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def sendall(self, data):
        self.obj.write(data)
        self.flush()

    def record(self, data):
        """The encrypted bytes of `data` (one record up to 16 KiB), not sent."""
        self.obj.write(data)
        return self.out.read()

    def recv(self, n):
        while True:
            try:
                return self.obj.read(n)
            except ssl.SSLWantReadError:
                self.fill()

    def close(self):
        self.sock.close()


class Suite:
    def __init__(self, a):
        self.a = a
        self.tried = 0
        self.refused = 0
        self.control_failed = False
        self.lock = threading.Lock()

    def attempt(self, what, fn):
        """Runs fn; it raises Refused (good), Served (bad) or returns a refusal text (good)."""
        try:
            why = fn()
            ok = True
        except Refused as e:
            ok, why = True, str(e)
        except Served as e:
            ok, why = False, f"SERVED: {e}"
        except (ssl.SSLError, ConnectionError, socket.timeout) as e:
            ok, why = True, f"connection refused or ended: {type(e).__name__}: {e}"
        except Exception as e:  # a bug of the suite is a failure, not a refusal
            ok, why = False, f"ERROR: {type(e).__name__}: {e}"
        with self.lock:
            self.tried += 1
            self.refused += 1 if ok else 0
            print(f"[hostile] {'refused' if ok else 'NOT REFUSED'}: {what}: {why}", flush=True)

    # ---- NBD -------------------------------------------------------------------------------

    def nbd_open(self, holder, export=None, verify=True):
        c = Nbd(self.a.nbd)
        if holder != "plaintext":
            c.starttls(tls_context(None if holder == "none" else holder, self.a.tls, verify))
        c.go(export or self.a.export)
        return c

    def expect_refused_open(self, holder):
        def run():
            c = self.nbd_open(holder)
            c.close()
            raise Served(f"export {self.a.export} opened")
        return run

    def nbd_oversized_option(self):
        before = rss_kib(self.a.gateway_pid)
        c = Nbd(self.a.nbd)
        # An option that claims 4 GiB - 1 of data, then 64 KiB of it.
        c.sock.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, 0xFFFFFFFF) + b"\0" * 65536)
        try:
            _, kind, data = c.reply()
        except Refused as e:
            kind, data = None, str(e)
        c.close()
        grown = rss_kib(self.a.gateway_pid) - before
        if grown > 64 * 1024:
            raise Served(f"the gateway grew by {grown} KiB")
        if kind is not None and not kind & REP_ERR:
            raise Served(f"answered {kind:#x}")
        return f"{'closed' if kind is None else f'error {kind - REP_ERR}'}; gateway grew {grown} KiB"

    def nbd_oversized_write(self):
        before = rss_kib(self.a.gateway_pid)
        c = self.nbd_open("client")
        c.request(CMD_WRITE, 0, 0x7FFFFFF0, b"\xee" * 65536)
        try:
            error, _ = c.simple_reply()
        except (Refused, ssl.SSLError, ConnectionError) as e:
            error = None
            why = f"closed ({e})"
        c.close()
        grown = rss_kib(self.a.gateway_pid) - before
        if grown > 64 * 1024:
            raise Served(f"the gateway grew by {grown} KiB")
        if error == 0:
            raise Served("a 2 GiB write was accepted")
        return (why if error is None else f"error {error}") + f"; gateway grew {grown} KiB"

    def nbd_read_past_end(self):
        c = self.nbd_open("client")
        c.request(CMD_READ, (1 << 62), 4096)
        error, _ = c.simple_reply()
        c.close()
        if error == 0:
            raise Served("a read past the end was answered with data")
        return f"error {error}"

    def nbd_truncated_write(self):
        c = self.nbd_open("client")
        c.request(CMD_WRITE, self.a.marker_offset, 65536, b"\x66" * 100)
        c.close()  # the other 65,436 bytes never come
        time.sleep(0.5)
        c = self.nbd_open("client")
        c.request(CMD_READ, self.a.marker_offset, 4096)
        error, _ = c.simple_reply()
        data = recv_exact(c.sock, 4096) if error == 0 else b""
        c.close()
        if error != 0:
            raise Served(f"the marker block no longer reads: error {error}")
        if data != bytes([self.a.marker_byte]) * 4096:
            raise Served("a truncated write changed the marker block")
        return "nothing of it was written (the marker block is intact)"

    def nbd_slow_handshake(self):
        """A byte a second during the handshake: must be cut (10 s handshake limit)."""
        c = Nbd(self.a.nbd, timeout=60)
        frame = struct.pack(">QII", IHAVEOPT, OPT_GO, 64) + b"x" * 64
        start = time.monotonic()
        for i, b in enumerate(frame):
            try:
                c.sock.sendall(bytes([b]))
                r, _, _ = select.select([c.sock], [], [], 1.0)
                if r and not c.sock.recv(1):
                    return f"closed after {i + 1} bytes, {time.monotonic() - start:.0f} s"
            except ConnectionError as e:
                return f"cut after {i + 1} bytes, {time.monotonic() - start:.0f} s ({e})"
        raise Served(f"all {len(frame)} bytes taken at a byte a second")

    def nbd_slow_request(self):
        """A WRITE whose 4 KiB payload comes as one TLS record, trickled: GnuTLS takes
        a record whole, so the reader must still look at the clock between the bytes and cut
        the request (30 s for a payload); nothing of it may be written."""
        c = Nbd(self.a.nbd, timeout=90)
        c.option(OPT_STARTTLS)
        if c.reply()[1] != REP_ACK:
            raise Served("STARTTLS refused to the client certificate")
        c.sock = BioTls(c.sock, tls_context("client", self.a.tls))
        c.go(self.a.export)
        c.request(CMD_WRITE, self.a.slow_offset, 4096)
        record = c.sock.record(b"\x99" * 4096)
        raw = c.sock.sock
        start = time.monotonic()
        for i, b in enumerate(record):
            try:
                raw.sendall(bytes([b]))
                # Two bytes a second: each recv() inside GnuTLS gets a byte well within the
                # socket's 1 s receive timeout, so only the read slice brings the clock in.
                r, _, _ = select.select([raw], [], [], 0.5)
                if r and not raw.recv(16):
                    return (f"closed after {i + 1} of the record's {len(record)} bytes, "
                            f"{time.monotonic() - start:.0f} s")
            except ConnectionError as e:
                return f"cut after {i + 1} bytes of the record, {time.monotonic() - start:.0f} s ({e})"
            if time.monotonic() - start > 80:
                break
        raise Served(f"still open after {time.monotonic() - start:.0f} s, two bytes a second")

    def nbd_idle_flood(self, total=10000, batch=500):
        """10,000 connections from one address that send nothing: at most the per-address cap
        stays open at once."""
        held = []
        refused = 0
        for first in range(0, total, batch):
            pending = {}
            sel = selectors.DefaultSelector()  # epoll: select() stops at descriptor 1024
            for _ in range(min(batch, total - first)):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", self.a.nbd))
                pending[s.fileno()] = s
                sel.register(s, selectors.EVENT_WRITE)
            deadline = time.monotonic() + 5
            while pending and time.monotonic() < deadline:
                for key, _ in sel.select(0.5):
                    s = pending.pop(key.fd)
                    sel.unregister(s)
                    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        refused += 1
                        s.close()
                    else:
                        held.append(s)
            for s in pending.values():  # never accepted: the backlog is full, a refusal too
                refused += 1
                s.close()
            sel.close()
        # The kernel completes a connection before the gateway accepts it, so what sits in the
        # accept backlog looks open until the gateway gets to it. Taken by the gateway, a
        # connection gets the server's greeting (the first bytes of the NBD handshake) or is
        # closed at once (over the cap). Wait until every one has its greeting or its end,
        # however long a busy machine takes (it took over 5 s beside three other tests): from
        # then on the gateway accepts nothing new from here, so what is open only falls, and
        # counting it is the check. (The gateway's 10 s handshake timeout closes idle
        # connections; if reaching them all took longer, the count says less.)
        # A connection the kernel completed while the gateway's accept queue was full can be
        # one the gateway never gets: the server side drops it after its SYN-ACK retries (about
        # a minute) and tells the client nothing, since the client sends nothing. Seen once on
        # a machine loaded with a cold sanitizer build (10 of 10,000 never reached in 120 s).
        # So after 30 s the sockets still waiting send one byte: the server's kernel answers a
        # connection it dropped with a reset (closed: never held), and one the gateway does hold
        # still gets its greeting (the byte is the start of a handshake that then times out).
        greeted = set()
        start = time.monotonic()
        nudged = False
        while True:
            still, waiting = [], 0
            for s in held:
                try:
                    while True:
                        if not s.recv(65536):
                            s.close()
                            break
                        greeted.add(s)
                except BlockingIOError:
                    still.append(s)
                    waiting += s not in greeted
                except OSError:
                    s.close()
            held = still
            if waiting == 0:
                break
            if not nudged and time.monotonic() - start > 30:
                nudged = True
                for s in held:
                    if s not in greeted:
                        try:
                            s.send(b"\0")
                        except OSError:
                            pass  # reset already: the next pass sees it closed
            if time.monotonic() - start > 120:
                raise RuntimeError(f"the gateway had not reached {waiting} connections in 120 s")
            time.sleep(0.2)
        took = time.monotonic() - start
        open_now = len(held)
        for s in held:
            s.close()
        if open_now > self.a.per_peer_cap:
            raise Served(f"{open_now} idle connections from one address held open "
                         f"(cap {self.a.per_peer_cap})")
        return (f"{open_now} held open (cap {self.a.per_peer_cap}), "
                f"{total - open_now} closed ({refused} of them never accepted); the gateway "
                f"reached the last of them {took:.1f} s after the flood")

    # ---- gRPC ports and etcd -----------------------------------------------------------------

    H2_PROBE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0\0\0\x04\0\0\0\0\0"  # preface, SETTINGS

    def probe(self, port, holder, probe):
        """TLS as `holder` ("none": no certificate), then `probe`; the first bytes answered
        (b"" when the server closed). TLS 1.3: the server checks a client certificate after the
        client's side of the handshake ended, so its refusal comes as an alert on the first
        read."""
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        ctx = tls_context(None if holder == "none" else holder, self.a.tls, verify_server=False)
        if probe == self.H2_PROBE:
            ctx.set_alpn_protocols(["h2"])
        t = ctx.wrap_socket(s)
        try:
            t.sendall(probe)
            t.settimeout(5)
            return t.recv(9)
        finally:
            t.close()

    def refused_peer(self, port, holder, probe):
        def run():
            data = self.probe(port, holder, probe)
            if not data:
                raise Refused("closed after the handshake")
            raise Served(f"the port answered {data!r}")
        return run

    def control(self, what, port, holder, probe):
        """The same probe with a certificate the port admits must be answered: otherwise the
        refusals above prove nothing."""
        why = "closed"
        try:
            data = self.probe(port, holder, probe)
        except (OSError, ssl.SSLError) as e:
            data, why = b"", str(e)
        if data:
            print(f"[hostile] control: {what}: answered", flush=True)
            return
        print(f"[hostile] CONTROL FAILED: {what}: not answered ({why})", flush=True)
        self.control_failed = True

    def grpc_oversized_frame(self, port, holder):
        """A HEADERS frame claiming 16 MiB - 1 (HTTP/2's default limit is 16 KiB), from a peer
        the port admits: the connection must end."""
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        ctx = tls_context(holder, self.a.tls, verify_server=False)
        ctx.set_alpn_protocols(["h2"])
        t = ctx.wrap_socket(s)
        t.sendall(self.H2_PROBE)
        t.sendall(struct.pack(">I", 0xFFFFFF)[1:] + b"\x01\x04" + struct.pack(">I", 1)
                  + b"\0" * 4096)
        t.settimeout(10)
        got = b""
        try:
            while True:
                part = t.recv(65536)
                if not part:
                    break
                got += part
        except (ssl.SSLError, ConnectionError, socket.timeout) as e:
            if isinstance(e, socket.timeout):
                raise Served("the connection stayed open after an oversized frame") from e
        t.close()
        return f"closed (after {len(got)} bytes of settings or GOAWAY)"

    def grpc_truncated_frame(self, port, holder):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        ctx = tls_context(holder, self.a.tls, verify_server=False)
        ctx.set_alpn_protocols(["h2"])
        t = ctx.wrap_socket(s)
        t.sendall(self.H2_PROBE + b"\0\x10\0\x01")  # half a HEADERS frame's header
        t.close()
        data = self.probe(port, holder, self.H2_PROBE)
        if not data:
            raise Served("the port stopped answering after a truncated frame")
        return "dropped with its connection; the port still answers"

    def etcd_as(self, holder, *argv):
        d = os.path.join(self.a.tls, holder)
        r = subprocess.run(["etcdctl", f"--endpoints=https://{self.a.etcd}", "--command-timeout=5s",
                            f"--cacert={d}/ca-cert.pem", f"--cert={d}/cert.pem",
                            f"--key={d}/key.pem", *argv],
                           env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                           text=True, timeout=30)
        if r.returncode == 0:
            raise Served(f"etcdctl {' '.join(argv)} answered: {r.stdout.strip()[:80]}")
        if "permission denied" not in r.stderr:
            raise Served(f"etcdctl failed, but not for permission: {r.stderr.strip()[-120:]}")
        return "permission denied"

    def admin_as(self, holder):
        def run():
            argv = [self.a.ctl, "--gateway", f"127.0.0.1:{self.a.admin}", "--timeout", "5"]
            if holder:
                argv += ["--tls-dir", os.path.join(self.a.tls, holder)]
            r = subprocess.run(argv + ["vdi", "list"], capture_output=True, text=True, timeout=30)
            if r.returncode == 0:
                raise Served(f"vdi list answered: {r.stdout.strip()[:80]}")
            return r.stderr.strip().splitlines()[-1][:120]
        return run

    # ---- the block data port -----------------------------------------------------------------

    def data_frame(self, op, length, magic=b"CRD2", vdi=1):
        return (magic + struct.pack("<BBHII", op, 0, 0, vdi, 0)
                + struct.pack("<QIIQQ", 0, length, 10000, 0, 1))

    def data_session(self):
        s = socket.create_connection(("127.0.0.1", self.a.data_port), timeout=10)
        return tls_context("gateway-1", self.a.tls, verify_server=False).wrap_socket(s)

    def data_expect_close(self, frame, what):
        def run():
            t = self.data_session()
            t.sendall(frame)
            t.settimeout(10)
            try:
                data = t.recv(24)
            except socket.timeout as e:
                raise Served(f"{what}: no answer and still open") from e
            if data:
                raise Served(f"{what}: answered {data!r}")
            return "connection closed"
        return run

    def data_lying_read(self):
        before = rss_kib(self.a.cache_pid)
        t = self.data_session()
        frames = b"".join(self.data_frame(1, 64 << 20, vdi=0xFFFF) for _ in range(64))
        t.sendall(frames)
        t.settimeout(10)
        answers = 0
        try:
            while answers < 64:
                head = recv_exact(t, 24)
                code = head[4]
                mlen, dlen = struct.unpack("<II", head[8:16])
                recv_exact(t, mlen + dlen) if mlen + dlen else None
                if code == 0:
                    raise Served("a 64 MiB read of an unknown VDI answered OK")
                answers += 1
        except Refused:
            pass
        t.close()
        grown = rss_kib(self.a.cache_pid) - before
        if grown > 64 * 1024:
            raise Served(f"the cache node grew by {grown} KiB")
        return f"{answers} error answers; cache node grew {grown} KiB"

    def data_truncated(self):
        t = self.data_session()
        t.sendall(self.data_frame(2, 4096)[:30])
        t.close()
        # The node must still serve: a well-formed frame of an unknown VDI gets an error answer.
        t = self.data_session()
        t.sendall(self.data_frame(1, 4096, vdi=0xFFFF))
        head = recv_exact(t, 24)
        t.close()
        if head[:4] != b"CRS2":
            raise Served(f"after a truncated frame the node answered {head!r}")
        return "the half frame was dropped with its connection; the node still answers"

    def run(self):
        slow = [threading.Thread(target=self.attempt, args=(
                    "NBD: a byte a second during the handshake", self.nbd_slow_handshake)),
                threading.Thread(target=self.attempt, args=(
                    "NBD: a WRITE's payload as one TLS record, two bytes a second",
                    self.nbd_slow_request))]
        for t in slow:
            t.start()
        self.attempt("NBD: plaintext client", self.expect_refused_open("plaintext"))
        self.attempt("NBD: TLS without a certificate", self.expect_refused_open("none"))
        self.attempt("NBD: a certificate of another CA (CN client-0)",
                     self.expect_refused_open("other"))
        self.attempt("NBD: an expired certificate (on the export's list)",
                     self.expect_refused_open("expired"))
        self.attempt("NBD: a valid client certificate without rights to the export",
                     self.expect_refused_open("bob"))
        self.attempt("NBD: a cache node's certificate", self.expect_refused_open("cachenode-1"))
        self.attempt("NBD: an option claiming 4 GiB", self.nbd_oversized_option)
        self.attempt("NBD: a 2 GiB write", self.nbd_oversized_write)
        self.attempt("NBD: a read past the end of the export", self.nbd_read_past_end)
        self.attempt("NBD: a truncated write", self.nbd_truncated_write)
        self.attempt("admin: no certificate", self.admin_as(None))
        self.attempt("admin: the NBD client certificate", self.admin_as("client"))
        self.attempt("admin: a certificate of another CA", self.admin_as("other"))
        for name, port, holder in (("admin", self.a.admin, "admin"),
                                   ("cache node gRPC", self.a.cache_grpc, "gateway-1"),
                                   ("data node gRPC", self.a.data_grpc, "cachenode-1")):
            self.attempt(f"{name}: a 16 MiB HTTP/2 frame ({holder}'s certificate)",
                         lambda p=port, h=holder: self.grpc_oversized_frame(p, h))
            self.attempt(f"{name}: a truncated HTTP/2 frame ({holder}'s certificate)",
                         lambda p=port, h=holder: self.grpc_truncated_frame(p, h))
        self.attempt("etcd: the NBD client certificate reads the catalog",
                     lambda: self.etcd_as("client", "get", "--prefix", "/ringcache/vdis/"))
        self.attempt("etcd: the NBD client certificate writes the catalog",
                     lambda: self.etcd_as("client", "put", "/ringcache/vdis/evil", "x"))
        self.attempt("etcd: a cache node writes the catalog",
                     lambda: self.etcd_as("cachenode-1", "put", "/ringcache/vdis/evil", "x"))
        h2, data = self.H2_PROBE, self.data_frame(1, 4096, vdi=0xFFFF)
        self.control("cache node gRPC, a gateway's certificate", self.a.cache_grpc, "gateway-1", h2)
        self.control("data node gRPC, a cache node's certificate", self.a.data_grpc, "cachenode-1",
                     h2)
        self.control("block data, a gateway's certificate", self.a.data_port, "gateway-1", data)
        self.attempt("cache node gRPC: the NBD client certificate",
                     self.refused_peer(self.a.cache_grpc, "client", h2))
        self.attempt("cache node gRPC: a data node's certificate",
                     self.refused_peer(self.a.cache_grpc, "datanode-1", h2))
        self.attempt("data node gRPC: the NBD client certificate",
                     self.refused_peer(self.a.data_grpc, "client", h2))
        self.attempt("data node gRPC: no certificate",
                     self.refused_peer(self.a.data_grpc, "none", h2))
        self.attempt("data node gRPC: a certificate of another CA",
                     self.refused_peer(self.a.data_grpc, "other", h2))
        self.attempt("block data: no certificate", self.refused_peer(self.a.data_port, "none", data))
        self.attempt("block data: the NBD client certificate",
                     self.refused_peer(self.a.data_port, "client", data))
        self.attempt("block data: a cache node's certificate",
                     self.refused_peer(self.a.data_port, "cachenode-1", data))
        self.attempt("block data: bad magic",
                     self.data_expect_close(self.data_frame(1, 4096, magic=b"EVIL"), "bad magic"))
        self.attempt("block data: a read of 64 MiB + 1",
                     self.data_expect_close(self.data_frame(1, (64 << 20) + 1), "oversized"))
        self.attempt("block data: 64 lying reads of 64 MiB", self.data_lying_read)
        self.attempt("block data: a truncated frame", self.data_truncated)
        self.attempt("NBD: 10,000 idle connections from one address", self.nbd_idle_flood)
        for t in slow:
            t.join()
        print(f"security: tried={self.tried} refused={self.refused}", flush=True)
        return 0 if self.tried == self.refused and not self.control_failed else 1


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tls", required=True)
    p.add_argument("--ctl", required=True)
    for name in ("nbd", "admin", "data-port", "cache-grpc", "data-grpc", "gateway-pid",
                 "cache-pid", "marker-offset", "marker-byte", "slow-offset"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--per-peer-cap", type=int, default=128)
    p.add_argument("--etcd", required=True)
    p.add_argument("--export", required=True)
    return Suite(p.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
