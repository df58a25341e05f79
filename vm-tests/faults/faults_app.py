#!/usr/bin/python3
# vm-tests/faults/faults_app.py: the application stand-in for the fault campaign
# (faults.sh). Runs as the MainPID of opencode-v2.service (User=byk) on the
# stand-ins' skeleton, vm-tests/lib/standin.py (sessions, connection, helper,
# frames, the control socket). The root driver (faults.py) sends one JSON
# request per line over /run/opencode-test/control.sock; while a request
# runs, the app writes "MARK <what>" lines at the moments a fault is timed from
# and may wait for a "GO" line back; the last line is the JSON answer.
# Every session records each envelope it got, whether the connection reached
# EOF, and whether a deadline passed (a hang): the driver judges them.
import array
import json
import os
import random
import re
import select
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, "/vm-tests/lib")
import standin  # noqa: E402  (Session, Conn, spawn_helper, frame types)

TERMINAL = standin.TERMINAL






# --- case 1: one session, the supervisor SIGKILLed at a chosen phase ----------------------------------
KILL_ARGV = {
    "handshake": ["true"],
    "start": ["sh", "-c", "echo started-ok; sleep 2"],
    "streaming": ["yes"],
    "stopping": ["sh", "-c", "trap '' TERM HUP; echo armed; while :; do sleep 0.1; done"],
    "cleanup": ["sh", "-c", "sleep 0.3; exit 3"],
}


def kill_session(req, link):
    phase = req["phase"]
    s = standin.Session(KILL_ARGV[phase], req.get("timeout", 60))
    if not s.connect():
        return s.rec
    if phase == "handshake":
        # Connected (accepted, or still in the listen backlog), no START yet.
        link.mark("connected")
        link.wait_go()
        s.start()
    else:
        s.start()
        if phase == "start":
            link.mark("start-sent")   # START is out: StartTransientUnit follows
        elif s.started():
            if phase == "streaming":
                s.pump(lambda: s.rec["output_len"] > 0)
                link.mark("streaming")
            elif phase == "stopping":
                s.pump(lambda: b"armed" in s.out)
                s.c.send(standin.STOP)
                link.mark("stop-sent")
            else:
                link.mark("running")
    return s.finish()


# --- case 2: M live sessions through daemon-reexec / daemon-reload ------------------------------------
def live(req, link):
    m = req["m"]
    gate = threading.Semaphore(8)   # at most 8 between connect and started (PROTOCOL section 8)
    stop = threading.Event()
    ready = threading.Barrier(m + 1)
    recs = [None] * m

    def one(i):
        s = standin.Session(["cat"], req.get("timeout", 120))
        s.rec.update(rounds=0, rounds_after_stop=0, max_rtt_ms=0.0)
        recs[i] = s.rec
        with gate:
            ok = s.connect() and (s.start() or True) and s.started()
        try:
            ready.wait(60)
        except threading.BrokenBarrierError:
            pass
        if not ok:
            s.finish()
            return
        n = 0
        while True:
            last = stop.is_set()
            n += 1
            token = ("s%d-r%d" % (i, n)).encode()
            t0 = time.monotonic()
            s.c.send(standin.INPUT, token + b"\n")
            if not s.pump(lambda: token + b"\r\n" + token in s.out):
                break
            s.rec["max_rtt_ms"] = max(s.rec["max_rtt_ms"], round((time.monotonic() - t0) * 1000, 1))
            s.rec["rounds"] += 1
            if last:
                s.rec["rounds_after_stop"] += 1
                s.c.send(standin.EOF)   # cat ends: exit 0
                break
            time.sleep(0.2)
        s.finish()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(m)]
    for t in threads:
        t.start()
    try:
        ready.wait(90)
    except threading.BrokenBarrierError:
        pass
    link.mark("live")
    link.wait_go()          # the driver has done its daemon-reexec/-reload
    stop.set()
    for t in threads:
        t.join()
    return {"sessions": recs}


# --- case 3: connection churn ---------------------------------------------------------------------------
def churn(req, link):
    rnd = random.Random(req["seed"])
    kinds = {}
    codes = {}
    good = []
    for i in range(req["n"]):
        if i % 250 == 249:   # the supervisor still serves during the churn
            s = standin.Session(["true"], 30)
            if s.connect():
                s.start()
                s.started()
            good.append(s.finish())
            continue
        kind = rnd.choice(["close", "close", "garbage", "garbage_read", "garbage_fd", "no_start", "half_header"])
        kinds[kind] = kinds.get(kind, 0) + 1
        c = standin.Conn()
        try:
            c.connect()
        except OSError as e:
            codes["connect_errno_%d" % e.errno] = codes.get("connect_errno_%d" % e.errno, 0) + 1
            continue
        try:
            if kind in ("garbage", "garbage_read"):
                c.sock.sendall(rnd.randbytes(rnd.randint(8, 64)))
            elif kind == "garbage_fd":
                # A descriptor in the first segment, as the helper sends it, with
                # random bytes for a frame: the supervisor decodes the header.
                dirfd = os.open("/home/byk", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    c.sock.sendmsg([bytes([rnd.choice([1, 1, 2])]) + rnd.randbytes(rnd.randint(7, 40))],
                                   [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [dirfd]))])
                finally:
                    os.close(dirfd)
            elif kind == "half_header":
                c.sock.sendall(b"\x01\x01\x00")
            elif kind == "no_start":
                time.sleep(rnd.random() * 0.005)
            if kind in ("garbage_read", "garbage_fd"):
                f = c.read_frame(time.monotonic() + 10)
                code = json.loads(f[1]).get("code", "?") if f and f[0] == standin.EVENT else "eof"
                codes[code] = codes.get(code, 0) + 1
        except (OSError, TimeoutError) as e:
            codes[type(e).__name__] = codes.get(type(e).__name__, 0) + 1
        c.sock.close()
    return {"kinds": kinds, "codes": codes, "good": good}


# --- case 4: application restart (the MainPID changes) ---------------------------------------------------
KEPT = []


def frames_until_end(conn, rec, until):
    """Reads CONN to its EOF into REC (envelopes, terminals, eof, timeout)."""
    while True:
        try:
            f = conn.read_frame(until)
        except TimeoutError:
            rec["timeout"] = True
            break
        if f is None:
            rec["eof"] = True
            break
        if f[0] == standin.EVENT:
            env = json.loads(f[1])
            rec["envelopes"].append({k: env.get(k) for k in ("type", "code", "signal") if k in env})
    rec["terminals"] = sum(1 for e in rec["envelopes"] if e["type"] in TERMINAL)
    conn.sock.close()
    return rec


def restart_prep(req, link):
    """Opens M `cat` sessions (each echoes once) and one connection that never
    sends START, then forks the heir: a child that keeps the connection
    without START and half of the sessions (the other half stay with this
    process only and end with it). The unit runs with KillMode=process for
    this case, so the heir outlives the restart in the unit's own cgroup."""
    m = req["m"]
    sessions = []
    for i in range(m):
        s = standin.Session(["cat"], 60)
        if s.connect():
            s.start()
            if s.started():
                s.c.send(standin.INPUT, b"r%d\n" % i)
                s.pump(lambda: b"r%d\r\nr%d" % (i, i) in s.out)
        sessions.append(s)
    pending = standin.Conn()
    pending.connect()
    time.sleep(0.5)   # authenticated by now, START not sent
    held, kept = sessions[: (m + 1) // 2], sessions[(m + 1) // 2:]
    running = [s.rec.get("envelopes", [{}])[0].get("type") == "started" for s in sessions]
    parent = os.pidfd_open(os.getpid())
    pid = os.fork()
    if pid == 0:
        try:
            heir(link, held, kept, pending, parent, running)
        finally:
            os._exit(0)
    os.close(parent)
    for s in held:
        s.c.sock.close()
    pending.sock.close()
    KEPT.extend(kept)   # open until this process ends
    return standin.NO_ANSWER   # the heir answers on the control connection


def heir(link, held, kept, pending, parent, running):
    standin.SERVER.close()
    for s in kept:
        s.c.sock.close()
    link.mark("heir %d" % os.getpid())
    link.wait_go()   # the driver restarted opencode-v2.service
    ans = {"heir_pid": os.getpid(), "running_before": running}
    # The old MainPID is gone before anything is tried.
    select.select([parent], [], [], 30)
    ans["parent_exited"] = bool(select.select([parent], [], [], 0)[0])
    dirfd = os.open("/home/byk", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    until = time.monotonic() + 40
    # 1. START on the connection the old MainPID opened and authenticated.
    ans["pending_helper_status"] = standin.spawn_helper(pending.sock, dirfd, ["sh", "-c", "echo heir-ran"], 80, 24)
    # 2. A fresh connection from the heir (not the MainPID).
    fresh = standin.Conn()
    try:
        fresh.connect()
        ans["fresh_helper_status"] = standin.spawn_helper(fresh.sock, dirfd, ["sh", "-c", "echo heir-ran"], 80, 24)
        ans["fresh"] = frames_until_end(fresh, {"envelopes": []}, until)
    except OSError as e:
        ans["fresh"] = {"connect_error": e.errno, "envelopes": []}
    # 3. A START on a running session's connection, then read every held one to its end.
    if held:
        ans["held_helper_status"] = standin.spawn_helper(held[0].c.sock, dirfd, ["sh", "-c", "echo heir-ran"], 80, 24)
    os.close(dirfd)
    ans["pending"] = frames_until_end(pending, {"envelopes": []}, until)
    ans["held"] = []
    for s in held:
        rec = {"envelopes": list(s.rec["envelopes"])}
        ans["held"].append(frames_until_end(s.c, rec, until))
    link.conn.sendall(json.dumps(ans).encode() + b"\n")


# --- case 5: memory pressure ------------------------------------------------------------------------------
# Allocates and touches 1 MiB at a time; says how far it got every 16 MiB.
# Reaching 1 GiB means no limit was enforced: it exits 99 rather than press the host.
HOG = ("import sys\nx = []\nfor i in range(1, 1025):\n    x.append(b'x' * (1 << 20))\n"
       "    if i % 16 == 0:\n        print('hog %d MiB' % i, flush=True)\nprint('hog reached 1 GiB')\nsys.exit(99)\n")


def memory(req, link):
    """K `cat` sessions echo, then a session whose command allocates past the
    slice's MemoryMax; afterwards each `cat` echoes again and exits 0 on EOF."""
    others = []
    for i in range(req["k"]):
        s = standin.Session(["cat"], 90)
        if s.connect():
            s.start()
            if s.started():
                s.c.send(standin.INPUT, b"m%d\n" % i)
                s.rec["echo_before"] = s.pump(lambda: b"m%d\r\nm%d" % (i, i) in s.out)
        others.append(s)
    hog = standin.Session(["python3", "-c", HOG], 90)
    if hog.connect():
        hog.start()
        hog.started()
    rec = hog.finish()
    rec["tail"] = bytes(hog.out[-200:]).decode("utf-8", "replace")
    for i, s in enumerate(others):
        if s.rec.get("echo_before"):
            s.c.send(standin.INPUT, b"n%d\n" % i)
            s.rec["echo_after"] = s.pump(lambda: b"n%d\r\nn%d" % (i, i) in s.out)
            s.c.send(standin.EOF)
        s.finish()
    return {"hog": rec, "others": [s.rec for s in others]}


# --- case 6: slow and stalled readers -----------------------------------------------------------------------
def stall(req, link):
    """N sessions stream `yes | head -c B` (B + B/2 bytes through the PTY,
    which turns each \n into \r\n); each reader takes at least 64 KiB, then
    every reader stops until the driver's GO (the stall), then all read to
    the end. Bytes and y's are counted exactly (Session.pump counts the y's
    of a record that has "ys")."""
    n, b = req["n"], req["bytes"]
    stalled = threading.Barrier(n + 1)
    resume = threading.Event()
    gate = threading.Semaphore(8)   # at most 8 between connect and started
    recs = [None] * n

    def one(i):
        s = standin.Session(["sh", "-c", "yes | head -c %d" % b], req.get("timeout", 300))
        s.rec.update(expected=b + b // 2, expected_ys=(b + 1) // 2, ys=0)
        recs[i] = s.rec
        with gate:
            ok = s.connect() and (s.start() or True) and s.started()
        if ok:
            s.pump(lambda: s.rec["output_len"] >= 65536)
        s.rec["before_stall"] = s.rec["output_len"]
        try:
            stalled.wait(150)
        except threading.BrokenBarrierError:
            s.rec["barrier_broken"] = True
        resume.wait()
        s.finish()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    try:
        stalled.wait(160)
        link.mark("stalled")
        link.wait_go()   # the driver sampled the supervisor through the stall
    except threading.BrokenBarrierError:
        pass
    resume.set()
    for t in threads:
        t.join()
    return {"sessions": recs}


# --- case 7: detachable sessions: detach, restart, reattach (docs/PROTOCOL.md section 10) ---------------
# What one MainPID leaves for the next, per session: the cursor up to which
# every byte was checked (20 ASCII digits rewritten in place after each OUTPUT
# frame, one pwrite: a SIGKILL leaves the last one whole) and, in <id>.note,
# anything that went wrong before the restart. The service's RuntimeDirectory
# goes with the service, so this lives in byk's home.
DETACH_DIR = "/home/byk/faults-detach"
COUNTER_LINE = 9   # "%07d\r\n": the PTY turns each \n into \r\n
# The deterministic stream: lines 0..N-1. The first HALF come 100 lines per
# 10 ms so that the driver's fault falls mid-stream; then the command waits
# for the file GO (the driver makes it once the next MainPID runs, so the
# stream cannot end before the restart whatever the timing) and writes the
# rest at full speed, still detached: a 64 KiB ring overflows.
COUNTER = ("import os, sys, time\n"
           "n, half, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]\n"
           "for i in range(n):\n"
           "    if i == half:\n"
           "        while not os.path.exists(go):\n"
           "            time.sleep(0.05)\n"
           "    sys.stdout.write('%07d\\n' % i)\n"
           "    if i < half and i % 100 == 99:\n"
           "        sys.stdout.flush()\n"
           "        time.sleep(0.01)\n")


def counter_bytes(lo, hi):
    """Bytes LO..HI of the counter stream as the PTY delivers it."""
    first = lo // COUNTER_LINE
    s = b"".join(b"%07d\r\n" % i for i in range(first, (hi + COUNTER_LINE - 1) // COUNTER_LINE))
    return s[lo - first * COUNTER_LINE:hi - first * COUNTER_LINE]


def yes_bytes(lo, hi):
    """Bytes LO..HI of `yes` through the PTY: "y\r\n" over and over."""
    return (b"y\r\n" * ((hi - lo) // 3 + 2))[lo % 3:lo % 3 + hi - lo]


class Checked:
    """A stream checked byte for byte from cursor POS on against EXPECT(lo, hi)."""

    def __init__(self, pos, expect):
        self.pos, self.expect, self.bad = pos, expect, None

    def feed(self, data):
        if self.bad is None and data != self.expect(self.pos, self.pos + len(data)):
            self.bad = "bytes %d..%d differ from the expected stream" % (self.pos, self.pos + len(data))
        self.pos += len(data)


def envelope(rec, env):
    rec["envelopes"].append({k: env.get(k) for k in ("type", "code", "signal", "session") if k in env})


def list_sessions(until):
    """LIST on a new connection: (the `session` envelopes, the terminal one)."""
    c = standin.Conn()
    entries, end = [], None
    try:
        c.connect()
        c.send(standin.LIST)
        while True:
            f = c.read_frame(until)
            if f is None:
                break
            if f[0] == standin.EVENT:
                env = json.loads(f[1])
                if env.get("type") == "session":
                    entries.append(env)
                else:
                    end = env
    except (OSError, TimeoutError) as e:
        end = {"type": "exception", "what": repr(e)}
    finally:
        c.sock.close()
    return entries, end


class Attach:
    """ATTACH SID at CURSOR on a new connection. open() reads to `attached`
    (or a terminal envelope); rest() to EOF. on_output(self, data) sees each
    OUTPUT payload. The record is Session's (envelopes, terminals, eof,
    timeout) with `attached` (the whole envelope) and `bytes` after it."""

    def __init__(self, sid, cursor, until, on_output=None):
        self.sid, self.cursor, self.until, self.on_output = sid, cursor, until, on_output
        self.rec = {"envelopes": [], "bytes": 0, "eof": False, "timeout": False}
        self.c = standin.Conn()

    def frame(self):
        try:
            f = self.c.read_frame(self.until)
        except TimeoutError:
            self.rec["timeout"] = True
            return False
        if f is None:
            self.rec["eof"] = True
            return False
        if f[0] == standin.OUTPUT:
            self.rec["bytes"] += len(f[1])
            if self.on_output:
                self.on_output(self, f[1])
        elif f[0] == standin.EVENT:
            env = json.loads(f[1])
            if env.get("type") == "attached":
                self.rec["attached"] = {k: env.get(k) for k in ("session", "unit", "cursor", "dropped", "next", "pid")}
            envelope(self.rec, env)
        return True

    def open(self):
        try:
            self.c.connect()
            self.c.send(standin.ATTACH, self.sid.encode() + struct.pack(">Q", self.cursor))
        except OSError as e:
            self.rec["connect_error"] = e.errno
            return False
        while "attached" not in self.rec and not any(e["type"] in TERMINAL for e in self.rec["envelopes"]):
            if not self.frame():
                break
        return "attached" in self.rec

    def send(self, ftype, payload=b""):
        try:
            self.c.send(ftype, payload)
        except OSError as e:
            self.rec.setdefault("send_errors", []).append(type(e).__name__)

    def rest(self):
        if "connect_error" not in self.rec:
            while self.frame():
                pass
        self.rec["terminals"] = sum(1 for e in self.rec["envelopes"] if e["type"] in TERMINAL)
        self.c.sock.close()
        return self.rec


def detachable(argv, grace, ring, timeout=120):
    return standin.Session(argv, timeout, opts=["--detach", str(grace), "--scrollback", str(ring)])


def started_ids(s):
    e = s.rec["envelopes"][0]
    return {"session": e.get("session"), "unit": e.get("unit")}


def detach_reader(s, d, sid, state):
    """Reads one session of the old MainPID until this process dies: every
    byte checked, the cursor kept in D/SID after each frame."""
    fd = os.open(os.path.join(d, sid), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    chk = Checked(s.rec["output_len"], counter_bytes)
    os.pwrite(fd, b"%020d" % chk.pos, 0)
    note = "output before started" if chk.pos else None
    while note is None:
        try:
            f = s.c.read_frame(s.deadline)
        except TimeoutError:
            note = "no end before the deadline (before the restart)"
            break
        if f is None:
            note = "EOF before the restart"
        elif f[0] == standin.OUTPUT:
            chk.feed(f[1])
            if chk.bad:
                note = chk.bad + " (before the restart)"
            else:
                os.pwrite(fd, b"%020d" % chk.pos, 0)
                state["pos"] = chk.pos
        elif f[0] == standin.EVENT and json.loads(f[1]).get("type") in TERMINAL:
            note = "terminal envelope before the restart: %s" % f[1][:200].decode("utf-8", "replace")
    with open(os.path.join(d, sid + ".note"), "w") as f:
        f.write(note)
    state["note"] = note


def detach_prep(req, link):
    """M detachable sessions (grace G s; their rings taken in turn from
    RINGS) run the counter; a reader thread per session checks each byte and
    keeps the cursor, until the driver restarts or SIGKILLs this MainPID.
    Answers once every session has delivered a first byte."""
    d = os.path.join(DETACH_DIR, req["tag"])
    os.makedirs(d, exist_ok=True)
    lines = req["lines"]
    out, states = [], []
    for i in range(req["m"]):
        ring = req["rings"][i % len(req["rings"])]
        s = detachable(["python3", "-c", COUNTER, str(lines), str(lines // 2), os.path.join(d, "go")],
                       req["grace"], ring, req.get("timeout", 120))
        rec = {"ring": ring, "lines": lines}
        out.append(rec)
        if not (s.connect() and (s.start() or True) and s.started()):
            rec["start"] = s.finish()
            continue
        rec.update(started_ids(s))
        st = {"pos": 0}
        states.append(st)
        threading.Thread(target=detach_reader, args=(s, d, rec["session"], st), daemon=True).start()
    until = time.monotonic() + 60
    while time.monotonic() < until and not all(st["pos"] > 0 or "note" in st for st in states):
        time.sleep(0.02)
    return {"sessions": out, "streaming": [st.get("pos", 0) > 0 for st in states]}


def detach_resume(req, link):
    """The next MainPID: LIST, then ATTACH each session of detach_prep at the
    cursor its predecessor kept, check every byte from `attached`'s cursor to
    the stream's end, then the exit (code 0) and EOF. A session whose ring is
    smaller than the stream is attached once LIST says its command ended
    (while detached, so its ring overflowed); the others at once, mid-stream."""
    d = os.path.join(DETACH_DIR, req["tag"])
    until = time.monotonic() + req.get("timeout", 120)
    entries, end = list_sessions(until)
    byid = {e["session"]: e for e in entries}
    ans = {"listed": end, "list": entries, "sessions": []}

    def one(x, rec):
        sid = x["session"]
        rec.update(session=sid, ring=x["ring"], total=x["lines"] * COUNTER_LINE,
                   listed={k: byid[sid].get(k) for k in ("state", "unit", "first", "next", "scrollback", "grace",
                                                         "exited")} if sid in byid else None)
        try:
            with open(os.path.join(d, sid)) as f:
                rec["cursor_kept"] = int(f.read())
        except (OSError, ValueError) as e:
            rec["cursor_kept"] = None
            rec["cursor_error"] = repr(e)
        try:
            with open(os.path.join(d, sid + ".note")) as f:
                rec["note_before"] = f.read()
        except OSError:
            pass
        chk = []

        def on_output(a, data):
            if not chk:
                chk.append(Checked(a.rec["attached"].get("cursor") or 0, counter_bytes))
            chk[0].feed(data)

        if x["ring"] < rec["total"]:
            # Attached only once LIST says the command ended while detached:
            # its ring overflowed, so `dropped` must be exactly first - cursor.
            while time.monotonic() < until:
                entries, end = list_sessions(until)
                e = next((e for e in entries if e["session"] == sid), None)
                if e is None or e.get("exited") or (end or {}).get("type") != "listed":
                    break
                time.sleep(0.1)
            rec["listed_exited"] = {k: e.get(k) for k in ("state", "first", "next", "exited", "code")} if e else None
        a = Attach(sid, rec["cursor_kept"] or 0, until, on_output)
        a.open()
        rec.update(a.rest())
        rec["end"] = chk[0].pos if chk else (rec.get("attached") or {}).get("cursor")
        rec["bad"] = chk[0].bad if chk else None

    recs = [{} for _ in req["sessions"]]
    threads = [threading.Thread(target=one, args=(x, r)) for x, r in zip(req["sessions"], recs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ans["sessions"] = recs
    return ans


def hold_detached(specs, grace, ring, until):
    """Starts one detachable session per (kind, argv, ready-text) of SPECS,
    closes each connection once the command runs (its ready text seen), and
    LISTs until every one is listed detached. Returns the records."""
    recs = []
    for kind, argv, ready in specs:
        s = detachable(argv, grace, ring)
        rec = {"kind": kind}
        recs.append(rec)
        if not (s.connect() and (s.start() or True) and s.started()):
            rec["start"] = s.finish()
            continue
        rec.update(started_ids(s))
        if ready:
            rec["ready"] = s.pump(lambda: ready in s.out)
        s.c.sock.close()   # detached: the connection closed by the client
    ids = {r["session"] for r in recs if "session" in r}
    while True:
        entries, end = list_sessions(until)
        det = {e["session"] for e in entries if e.get("state") == "detached"}
        for r in recs:
            if r.get("session") in det:
                r["seen_detached"] = True
        # An attached one is listed "attached"; one no longer listed has ended.
        waiting = ids & {e["session"] for e in entries if e.get("state") != "detached"}
        if not waiting or time.monotonic() >= until or (end or {}).get("type") != "listed":
            return recs, entries, end
        time.sleep(0.05)


def refused(sid, until):
    """ATTACH to SID at cursor 0: the record (an error is expected)."""
    a = Attach(sid, 0, until)
    a.open()
    return a.rest()


def detach_grace(req, link):
    """Detachable sessions with a short grace, never attached again: a
    stream (its ring overflows while detached), an idle command, and one that
    exits 5 while detached (after the file GO). LIST until none of them is
    listed any more; then ATTACH to each is no_such_session."""
    d = os.path.join(DETACH_DIR, req["tag"])
    os.makedirs(d, exist_ok=True)
    go = os.path.join(d, "go")
    until = time.monotonic() + req.get("timeout", 90)
    recs, entries, end = hold_detached(
        [("stream", ["yes"], b"y\r\ny"), ("idle", ["sleep", "600"], None),
         ("exits", ["sh", "-c", 'echo up; while ! [ -e "$0" ]; do sleep 0.05; done; exit 5', go], b"up")],
        req["grace"], 65536, until)
    ans = {"sessions": recs, "first_list": [{k: e.get(k) for k in ("session", "state", "first", "next", "exited")}
                                            for e in entries], "first_listed": end}
    with open(go, "w"):
        pass
    ids = {r["session"] for r in recs if "session" in r}
    polls = 0
    while time.monotonic() < until:
        entries, end = list_sessions(until)
        polls += 1
        for e in entries:
            for r in recs:
                if e["session"] == r.get("session") and e.get("exited"):
                    r["listed_exited"] = {"code": e.get("code"), "signal": e.get("signal")}
        if not ids & {e["session"] for e in entries} and (end or {}).get("type") == "listed":
            break
        time.sleep(0.1)
    ans["gone_after_polls"] = polls
    ans["last_listed"] = end
    ans["still_listed"] = sorted(ids & {e["session"] for e in entries})
    for r in recs:
        if "session" in r:
            r["attach"] = refused(r["session"], until)
    return ans


def detach_hold(req, link):
    """M detachable sessions (half `yes`, half idle) detached by closing their
    connections, then listed detached: the driver ends the supervisor."""
    until = time.monotonic() + req.get("timeout", 60)
    specs = [("stream", ["yes"], b"y\r\ny") if i % 2 == 0 else ("idle", ["sleep", "600"], None)
             for i in range(req["m"])]
    recs, entries, end = hold_detached(specs, req["grace"], 65536, until)
    return {"sessions": recs, "listed": end}


def detach_gone(req, link):
    """After the supervisor's restart: LIST (none of IDS), ATTACH to each."""
    until = time.monotonic() + req.get("timeout", 60)
    entries, end = list_sessions(until)
    return {"listed": end, "list": [e["session"] for e in entries],
            "attach": {sid: refused(sid, until) for sid in req["ids"]}}


# --- case 8: every detachable ring full while detached ------------------------------------------------------
def rings(req, link):
    """N detachable sessions with rings of RING bytes (N x RING =
    kMaxScrollbackTotalBytes), one more that must be refused, all N detached
    by closing their connections; after the driver's GO each command writes
    1.5 x RING bytes (`yes | head -c RING` through the PTY) while detached and
    stays; LIST until every ring is full; after the next GO each is attached
    at cursor 0 (dropped = first exactly), its replay checked byte for byte
    (the stream's last RING bytes), then STOPped."""
    n, ring = req["n"], req["ring"]
    d = os.path.join(DETACH_DIR, req["tag"])
    os.makedirs(d, exist_ok=True)
    go = os.path.join(d, "go")
    until = time.monotonic() + req.get("timeout", 300)
    argv = ["sh", "-c", 'while ! [ -e "$0" ]; do sleep 0.2; done; yes | head -c %d; exec sleep 600' % ring, go]
    gate = threading.Semaphore(8)   # at most 8 between connect and started
    recs = [{} for _ in range(n)]
    sess = [None] * n

    def start(i):
        s = sess[i] = detachable(argv, req["grace"], ring)
        with gate:
            ok = s.connect() and (s.start() or True) and s.started()
        if ok:
            recs[i].update(started_ids(s))
        else:
            recs[i]["start"] = s.finish()

    threads = [threading.Thread(target=start, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    extra = detachable(["true"], req["grace"], req["extra_ring"], 30)
    if extra.connect():
        extra.start()
    ans = {"extra": extra.finish(), "sessions": recs}
    for s in sess:
        if s.c.sock.fileno() >= 0:
            s.c.sock.close()   # detached
    ids = {r["session"] for r in recs if "session" in r}
    while True:
        entries, end = list_sessions(until)
        if ids <= {e["session"] for e in entries if e.get("state") == "detached"} or time.monotonic() >= until \
                or (end or {}).get("type") != "listed":
            break
        time.sleep(0.05)
    ans["detached"] = len(ids & {e["session"] for e in entries if e.get("state") == "detached"})
    link.mark("detached")
    link.wait_go()   # the driver samples the supervisor from here on
    with open(go, "w"):
        pass
    total = ring + ring // 2
    polls = 0
    while True:
        entries, end = list_sessions(until)
        polls += 1
        full = {e["session"] for e in entries
                if e.get("state") == "detached" and e.get("next") == total and e["next"] - e["first"] == ring}
        if ids <= full or time.monotonic() >= until or (end or {}).get("type") != "listed":
            break
        time.sleep(0.1)
    ans["full"] = len(ids & full)
    ans["full_polls"] = polls
    ans["list_full"] = [{k: e.get(k) for k in ("session", "state", "first", "next", "scrollback")} for e in entries
                        if e["session"] in ids]
    link.mark("full")
    link.wait_go()   # the driver sampled the supervisor with every ring full

    def one(r):
        if "session" not in r:
            return
        chk = []

        def on_output(a, data):
            if not chk:
                chk.append(Checked(a.rec["attached"].get("cursor") or 0, yes_bytes))
            want = max(0, (a.rec["attached"].get("next") or 0) - chk[0].pos)   # replay bytes still to come
            if want:
                chk[0].feed(data[:want])
                if chk[0].pos == a.rec["attached"]["next"]:
                    a.send(standin.STOP)   # the replay is whole
            if len(data) > want:   # live output after the replay: what the STOP makes the PTY say
                r["after_replay"] = r.get("after_replay", "") + data[want:want + 200].decode("utf-8", "replace")

        a = Attach(r["session"], 0, until, on_output)
        with gate:
            ok = a.open()
        if ok and a.rec["attached"].get("next") == a.rec["attached"].get("cursor"):
            a.send(standin.STOP)   # nothing to replay
        r.update(a.rest())
        r["end"] = chk[0].pos if chk else None
        r["bad"] = chk[0].bad if chk else None

    threads = [threading.Thread(target=one, args=(r,)) for r in recs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ans


# --- soak: random session operations for a while (soak.py) ---------------------------------------------
RESIZE = 0x06
SOAK_SIGNALS = {1: "HUP", 2: "INT", 9: "KILL", 10: "USR1", 15: "TERM"}
# Weighted: the session kinds an application uses most come up most.
SOAK_KINDS = ["echo", "echo", "exit", "signal", "stop", "stream", "stream", "eof", "close", "resize",
              "bad_handshake"]
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def soak_session(kind, rnd, op):
    """One session of KIND with random parameters. The record says what was
    expected (`expect`: the exit envelope's code or signals, or None when the
    client closes first) and `check`: None when the content was as expected
    (echoes, exact byte counts, sizes), else what was wrong."""
    t0 = time.monotonic()
    if kind == "bad_handshake":
        # Connect, then close, garbage or half a header: never a session.
        c = standin.Conn()
        rec = {"kind": kind, "t0": t0, "check": None, "expect": None}
        try:
            c.connect()
            op("bad_handshake")
            v = rnd.choice(["close", "garbage", "half_header"])
            if v == "garbage":
                c.sock.sendall(rnd.randbytes(rnd.randint(8, 64)))
            elif v == "half_header":
                c.sock.sendall(b"\x01\x01\x00")
        except OSError as e:
            rec["connect_error"] = e.errno
        c.sock.close()
        rec["t1"] = time.monotonic()
        return rec
    expect, check = {"code": 0}, None
    if kind == "echo":
        argv = ["cat"]
    elif kind == "exit":
        n = rnd.randint(0, 120)
        argv, expect = ["sh", "-c", "exit %d" % n], {"code": n}
    elif kind in ("signal", "stop"):
        argv = ["sleep", "60"]
        sig = rnd.choice(sorted(SOAK_SIGNALS))
        # STOP: systemd's TERM and HUP reach the command together.
        expect = {"signal": [SOAK_SIGNALS[sig]] if kind == "signal" else ["TERM", "HUP"]}
    elif kind == "stream":
        n = rnd.randint(1, 1 << 20)
        argv = ["sh", "-c", "yes | head -c %d" % n]
        want = n + n // 2   # "y\n" pairs; the PTY turns each \n into \r\n
    elif kind == "eof":
        lines = ["".join(rnd.choice(LETTERS) for _ in range(rnd.randint(1, 1000))) + "\n"
                 for _ in range(rnd.randint(1, 4))]   # < 4,096 bytes: the tty's line buffer
        argv = ["wc", "-c"]
    elif kind == "close":
        argv, expect = ["cat"], None
    elif kind == "resize":
        argv = ["sh", "-c", "while read a; do stty size; done"]
        cols, rows = rnd.randint(20, 300), rnd.randint(10, 200)
    s = standin.Session(argv, 60)
    s.rec.update(kind=kind, t0=t0, expect=expect)

    def send(s, ftype, payload=b""):
        # EPIPE/ECONNRESET: the supervisor closed (or was killed); the
        # outcome is judged from what the connection brings until EOF.
        try:
            s.c.send(ftype, payload)
        except OSError as e:
            s.rec.setdefault("send_errors", []).append(type(e).__name__)

    if not s.connect():
        s.rec["t1"] = time.monotonic()
        return s.rec
    op("spawn")
    s.start()
    if s.started():
        if kind == "echo":
            for _ in range(rnd.randint(1, 5)):
                tok = ("e%08x" % rnd.getrandbits(32) + "".join(rnd.choice(LETTERS)
                                                               for _ in range(rnd.randint(0, 200)))).encode()
                send(s, standin.INPUT, tok + b"\n")
                op("write")
                if not s.pump(lambda: tok + b"\r\n" + tok in s.out):
                    check = "echo of a token missing"
                    break
            send(s, standin.EOF)
            op("eof")
        elif kind == "signal":
            send(s, standin.SIGNAL, bytes([sig]))
            op("signal")
        elif kind == "stop":
            send(s, standin.STOP)
            op("stop")
        elif kind == "stream":
            if rnd.random() < 0.3:   # a reader that stalls, then catches up
                time.sleep(rnd.uniform(0.2, 3.0))
                op("stall")
        elif kind == "eof":
            for line in lines:
                send(s, standin.INPUT, line.encode())
                op("write")
            send(s, standin.EOF)
            op("eof")
        elif kind == "close":
            send(s, standin.INPUT, b"bye\n")
            op("write")
            s.pump(lambda: b"bye\r\nbye" in s.out)
            s.c.sock.close()
            op("close")
            s.rec.update(t1=time.monotonic(), closed=True)
            return s.rec
        elif kind == "resize":
            send(s, RESIZE, struct.pack(">HH", cols, rows))
            op("resize")
            want_size = ("%d %d" % (rows, cols)).encode()
            for _ in range(50):   # the size travels on the unit channel, the newline on the stream
                send(s, standin.INPUT, b"\n")
                op("write")
                if s.pump(lambda: want_size in s.out, min(s.deadline, time.monotonic() + 0.2)):
                    break
            if want_size not in s.out:
                check = "stty size never said %s" % want_size.decode()
            send(s, standin.EOF)
            op("eof")
    rec = s.finish()
    rec["t1"] = time.monotonic()
    if kind == "stream" and rec["output_len"] != want:
        check = "%d output bytes, %d expected" % (rec["output_len"], want)
    elif kind == "eof" and not re.search(rb"(^|\n)%d\r\n" % sum(len(l) for l in lines), bytes(s.out)):
        check = "wc -c did not print %d" % sum(len(l) for l in lines)
    rec["check"] = check
    return rec


def soak(req, link):
    end = time.monotonic() + req["seconds"]
    lock = threading.Lock()
    ops, recs = {}, []

    def op(name):
        with lock:
            ops[name] = ops.get(name, 0) + 1

    def worker(seed):
        rnd = random.Random(seed)
        while time.monotonic() < end:
            kind = rnd.choice(SOAK_KINDS)
            try:
                rec = soak_session(kind, rnd, op)
            except Exception as e:  # the driver counts it as a lost session
                rec = {"kind": kind, "exception": repr(e)}
            with lock:
                recs.append(rec)

    rnd = random.Random(req["seed"])
    threads = [threading.Thread(target=worker, args=(rnd.randrange(1 << 30),)) for _ in range(req["workers"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"sessions": recs, "ops": ops}


# --- the invariant check's "a new session works" -------------------------------------------------------
def probe(req, link):
    s = standin.Session(["sh", "-c", "echo probe-ok; exit 0"], req.get("timeout", 30))
    if s.connect():
        s.start()
        s.started()
    rec = s.finish()
    rec["saw_output"] = b"probe-ok" in s.out
    return rec


OPS = {"kill": kill_session, "live": live, "churn": churn, "probe": probe, "soak": soak,
       "restart_prep": restart_prep, "memory": memory,
       "stall": stall, "detach_prep": detach_prep, "detach_resume": detach_resume, "detach_grace": detach_grace,
       "detach_hold": detach_hold, "detach_gone": detach_gone, "rings": rings}


if __name__ == "__main__":
    standin.serve(lambda req, link: OPS[req["op"]](req, link))
