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
       "stall": stall}


if __name__ == "__main__":
    standin.serve(lambda req, link: OPS[req["op"]](req, link))
