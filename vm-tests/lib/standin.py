#!/usr/bin/python3
# vm-tests/lib/standin.py: what every application stand-in of the real-systemd
# suites shares (each runs as the MainPID of opencode-v2.service, User=byk):
# the session protocol's frames (docs/PROTOCOL.md), the real client helper
# /usr/local/libexec/opencode-pty-client run with exactly fd 3 = a duplicate of
# the socket and fd 4 = the directory, one connection (Conn), one session with
# its whole record (Session), and the stand-ins' skeleton: the control socket
# /run/opencode-test/control.sock over which a root script sends one JSON
# request per line (serve and Link in the stand-in, call from a script,
# vm-tests/lib/driver.py's request from a root driver).
#   python3 /vm-tests/lib/standin.py call REQUEST|-   prints the stand-in's answer
# Stand-ins import it with sys.path.insert(0, "/vm-tests/lib").
import fcntl
import json
import os
import select
import socket
import struct
import sys
import threading
import time

SUPERVISOR = "/run/opencode-pty/supervisor.sock"
HELPER = "/usr/local/libexec/opencode-pty-client"
CONTROL = "/run/opencode-test/control.sock"
TERMINAL = ("exit", "error")

START, INPUT, SIGNAL, STOP, EOF, ENV = 0x01, 0x02, 0x03, 0x04, 0x05, 0x07
LIST, ATTACH = 0x08, 0x09   # section 10: sent by the application itself, no helper
OUTPUT, EVENT = 0x81, 0x82


def frame(ftype, payload=b""):
    return struct.pack(">BBHI", 1, ftype, 0, len(payload)) + payload


def env_payload(env):
    """The ENV frame's payload: count, then each NAME=VALUE with its length."""
    entries = [("%s=%s" % kv).encode() for kv in env.items()]
    return struct.pack(">I", len(entries)) + b"".join(struct.pack(">I", len(e)) + e for e in entries)


def spawn_helper(conn, dirfd, argv, cols, rows, env=False, opts=()):
    """Runs the real helper with fd 3 = dup(conn), fd 4 = dirfd, nothing else
    (with --env when the application sends an ENV frame after it; OPTS are
    more helper options, e.g. --detach SECONDS --scrollback BYTES)."""
    pid = os.fork()
    if pid == 0:
        try:
            c = fcntl.fcntl(conn.fileno(), fcntl.F_DUPFD, 10)
            d = fcntl.fcntl(dirfd, fcntl.F_DUPFD, 10)
            os.dup2(c, 3)
            os.dup2(d, 4)
            os.closerange(5, 1 << 16)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            os.execv(HELPER, [HELPER, "--cols", str(cols), "--rows", str(rows)] + (["--env"] if env else []) +
                     list(opts) + ["--"] + argv)
        except BaseException as e:  # report why the helper never ran
            os.write(2, ("standin: cannot run the helper: %r\n" % (e,)).encode())
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class Conn:
    def __init__(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.buf = b""
        self.eof = False

    def connect(self):
        self.sock.connect(SUPERVISOR)

    def send(self, ftype, payload=b""):
        self.sock.sendall(frame(ftype, payload))

    def take_frame(self):
        """The next whole frame already received as (type, payload), or None."""
        if len(self.buf) >= 8:
            ver, ftype, res, length = struct.unpack(">BBHI", self.buf[:8])
            if len(self.buf) >= 8 + length:
                payload = self.buf[8:8 + length]
                self.buf = self.buf[8 + length:]
                return ftype, payload
        return None

    def fill(self):
        """One recv into the buffer (the socket is readable); sets eof."""
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
        self.buf += data

    def read_frame(self, deadline):
        """Next (type, payload); None on EOF; raises TimeoutError. poll, not
        select: the scale suite's app holds descriptors above FD_SETSIZE."""
        while True:
            f = self.take_frame()
            if f is not None:
                return f
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame before the deadline")
            p = select.poll()
            p.register(self.sock, select.POLLIN)
            if p.poll(left * 1000):
                self.fill()


class Session:
    """One session through the real helper, with its whole record."""

    def __init__(self, argv, timeout, opts=()):
        self.rec = {"argv0": argv[0], "envelopes": [], "output_len": 0, "eof": False,
                    "timeout": False}
        self.argv = argv
        self.opts = opts   # more helper options (--detach ...)
        self.deadline = time.monotonic() + timeout
        self.out = bytearray()
        self.c = Conn()

    def connect(self):
        try:
            self.c.connect()
            return True
        except OSError as e:
            self.rec["connect_error"] = e.errno
            return False

    def start(self):
        dirfd = os.open("/home/byk", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.rec["helper_status"] = spawn_helper(self.c.sock, dirfd, self.argv, 80, 24, opts=self.opts)
        finally:
            os.close(dirfd)

    def terminal(self):
        return next((e for e in self.rec["envelopes"] if e["type"] in TERMINAL), None)

    def pump(self, pred, until=None):
        """Reads frames until pred() holds; False on EOF or a deadline."""
        until = until or self.deadline
        while not pred():
            try:
                f = self.c.read_frame(until)
            except TimeoutError:
                if until == self.deadline:
                    self.rec["timeout"] = True
                return False
            if f is None:
                self.rec["eof"] = True
                return False
            ftype, payload = f
            if ftype == OUTPUT:
                self.rec["output_len"] += len(payload)
                if "ys" in self.rec:
                    self.rec["ys"] += payload.count(b"y")
                self.out.extend(payload)
                del self.out[:-4096]  # only the tail is ever searched
            elif ftype == EVENT:
                env = json.loads(payload)
                self.rec["envelopes"].append({k: env.get(k) for k in ("type", "code", "signal", "unit",
                                                                     "exact", "result", "session")
                                              if k in env})
            else:
                self.rec.setdefault("unexpected", []).append(ftype)
        return True

    def started(self):
        return self.pump(lambda: any(e["type"] in ("started",) + TERMINAL for e in self.rec["envelopes"])) and \
            self.rec["envelopes"][0]["type"] == "started"

    def finish(self):
        """Reads to the terminal envelope, then to EOF (nothing may follow it)."""
        self.pump(lambda: self.terminal() is not None)
        if self.terminal() is not None and not self.rec["eof"]:
            self.pump(lambda: False, time.monotonic() + 10)
        self.rec["terminals"] = sum(1 for e in self.rec["envelopes"] if e["type"] in TERMINAL)
        self.c.sock.close()
        return self.rec


class Link:
    """The control connection of one request: the request line in, "MARK <what>"
    lines out (a moment the root driver times a fault from) and "GO" lines in,
    then the answer out."""

    def __init__(self, conn):
        self.conn = conn
        self.rfile = conn.makefile("rb")
        self.lock = threading.Lock()

    def mark(self, what):
        with self.lock:
            self.conn.sendall(("MARK %s\n" % what).encode())

    def wait_go(self):
        line = self.rfile.readline()
        return line.strip() == b"GO"


# A handler's answer when it answers on the link itself, or from another
# process (the fault campaign's heir): serve() sends nothing.
NO_ANSWER = object()
# The listening control socket, for a forked child to close.
SERVER = None


def serve(handler):
    """The stand-ins' skeleton: one JSON request per control connection,
    answered with handler(request, link)."""
    global SERVER
    try:
        os.unlink(CONTROL)
    except FileNotFoundError:
        pass
    srv = SERVER = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    srv.bind(CONTROL)
    srv.listen(4)
    while True:
        conn, _ = srv.accept()
        with conn:
            link = Link(conn)
            try:
                answer = handler(json.loads(link.rfile.readline()), link)
            except Exception as e:  # report, keep serving
                answer = {"exception": repr(e)}
            if answer is NO_ANSWER:
                continue
            try:
                conn.sendall(json.dumps(answer).encode() + b"\n")
            except OSError:
                pass


def call(request):
    """Sends REQUEST (JSON text, which a shell script may spread over lines) as
    one line and prints the stand-in's answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(CONTROL)
    # A raw newline cannot be inside a JSON string, so this keeps the request.
    s.sendall(request.replace("\n", " ").encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    sys.stdout.write(data.decode())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "call":
        # "-": the request from stdin, so that a secret in it (argv.sh's
        # environment marker) is in no process's command line.
        call(sys.stdin.read() if sys.argv[2] == "-" else sys.argv[2])
    else:
        sys.exit("usage: standin.py call REQUEST|-")
