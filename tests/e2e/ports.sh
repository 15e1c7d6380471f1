# Sourced by the e2e scripts: pick_base_port prints a base port P for deploy/cluster.sh whose
# ports (etcd P-2..P-1, single-process P+1..P+3, gateway P+9..P+11, nodes P+100..P+409) are all
# free on 127.0.0.1 right now, chosen at random below the ephemeral range (32768+) so that tests
# running side by side and client sockets do not collide with it.
pick_base_port() {
  python3 - << 'PY'
import random, socket
offsets = [-2, -1, 1, 2, 3, 9, 10, 11] + [o + i for o in (100, 200, 300, 400) for i in range(10)]
for _ in range(200):
    base = 20000 + 50 * random.randrange(0, 240)
    try:
        for off in offsets:
            with socket.socket() as s:
                s.bind(("127.0.0.1", base + off))
    except OSError:
        continue
    print(base)
    break
else:
    raise SystemExit("pick_base_port: no free port range found")
PY
}
