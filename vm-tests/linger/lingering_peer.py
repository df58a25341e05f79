# vm-tests/linger/lingering_peer.py: what any process of the application's
# user can do to the supervisor (issue #28 part 1). linger_app.py runs it inside
# a PTY session as `python3 -c <this file> RUN TAG N LINGER HOLD`, so it is a
# PTY command as user byk. It makes N loopback TCP connections whose client end
# has unsent data the server end never reads and SO_LINGER {1, LINGER}, sends
# each client end with one byte (SCM_RIGHTS) on its own connection to the
# supervisor's socket, and closes its own copy: the supervisor then holds the
# last reference, and a plain close() of it sleeps LINGER seconds. The
# supervisor refuses each connection (this process is not the MainPID) without
# reading it, so the descriptor is released by the close of the connection.
# It talks to the driver through files in RUN, never through the supervisor
# (whose loop is what is being measured):
#   TAG-armed.json    once the first refusal arrived (the supervisor is
#                     closing that connection now): what was sent
#   TAG-release       (the app writes it) stop holding the server ends
#   TAG-done.json     every refusal and when each server end saw its reset
# The server ends stay open (unread) until TAG-release or HOLD seconds after
# arming, so that a close that lingers really sleeps for that long.
import fcntl
import json
import os
import select
import socket
import struct
import sys
import termios
import time

SUPERVISOR = "/run/opencode-pty/supervisor.sock"
run, tag = sys.argv[1], sys.argv[2]
n, linger, hold = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])


def publish(name, obj):
    tmp = os.path.join(run, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, os.path.join(run, name))


def lingering_pair(srv, seconds):
    """A connected TCP pair; the client end's send queue is full (the server end
    never reads, its window is closed) and it lingers `seconds` on close."""
    cli = socket.create_connection(srv.getsockname())
    peer, _ = srv.accept()
    cli.setblocking(False)
    try:
        while True:
            cli.send(b"x" * 65536)
    except BlockingIOError:
        pass
    cli.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, seconds))
    # SIOCOUTQ (= TIOCOUTQ): bytes the peer has not acknowledged.
    unsent = struct.unpack("i", fcntl.ioctl(cli, termios.TIOCOUTQ, b"\0" * 4))[0]
    return cli, peer, unsent


srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0))
srv.listen(n + 1)

# Calibration: such a close, done here, sleeps (the kernel lingers), so a fast
# supervisor below is the supervisor's doing, not a kernel that never waits.
cli, peer, _ = lingering_pair(srv, 2)
t0 = time.monotonic()
cli.close()
calibration = round(time.monotonic() - t0, 3)
peer.close()

conns = []
for i in range(n):
    cli, peer, unsent = lingering_pair(srv, linger)
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    rec = {"unsent": unsent, "sent": 0, "refusal": None, "refusal_s": None, "reset_s": None}
    try:
        u.connect(SUPERVISOR)
        rec["sent"] = socket.send_fds(u, [b"x"], [cli.fileno()])
    except OSError as e:
        rec["error"] = e.strerror
    cli.close()  # the supervisor's copy is the last one
    rec["t"] = time.monotonic()
    u.setblocking(False)
    conns.append({"rec": rec, "u": u, "peer": peer, "buf": b""})


def poll_once(timeout):
    """Reads refusals (an EVENT frame's code, or EOF) and notes resets of the
    server ends: both only ever come from the supervisor's side."""
    p = select.poll()
    by_fd = {}
    for c in conns:
        if c["rec"]["refusal"] is None:
            p.register(c["u"], select.POLLIN)
            by_fd[c["u"].fileno()] = ("u", c)
        if c["rec"]["reset_s"] is None:
            p.register(c["peer"], 0)  # POLLERR/POLLHUP only: a reset; never read
            by_fd[c["peer"].fileno()] = ("peer", c)
    for fd, ev in p.poll(timeout * 1000):
        kind, c = by_fd[fd]
        rec = c["rec"]
        if kind == "peer":
            if ev & (select.POLLERR | select.POLLHUP):
                rec["reset_s"] = round(time.monotonic() - rec["t"], 3)
            continue
        try:
            data = c["u"].recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        c["buf"] += data
        if len(c["buf"]) >= 8:
            length = struct.unpack(">I", c["buf"][4:8])[0]
            if len(c["buf"]) >= 8 + length:
                rec["refusal"] = json.loads(c["buf"][8:8 + length]).get("code", "?")
        if not data and rec["refusal"] is None:
            rec["refusal"] = "eof"
        if rec["refusal"] is not None:
            rec["refusal_s"] = round(time.monotonic() - rec["t"], 3)


until = time.monotonic() + 60
while conns[0]["rec"]["refusal"] is None and time.monotonic() < until:
    poll_once(0.05)
publish(tag + "-armed.json", {"t": time.monotonic(), "calibration_close_s": calibration,
                              "linger": linger, "conns": [c["rec"] for c in conns]})

release = os.path.join(run, tag + "-release")
until = time.monotonic() + hold
while not os.path.exists(release) and time.monotonic() < until:
    poll_once(0.05)
poll_once(0)
publish(tag + "-done.json", {"released": os.path.exists(release), "conns": [c["rec"] for c in conns]})
print("lingering-peer %s done" % tag)
