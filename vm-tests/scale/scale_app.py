#!/usr/bin/python3
# vm-tests/scale/scale_app.py: the application stand-in of the scale suite
# (scale.sh), run as the MainPID of opencode-v2.service (User=byk). It holds N
# sessions at once in one process, as the application must (only the MainPID
# may connect), and reuses vm-tests/lib/standin.py's connection, frame, helper
# and control-socket code. Requests from the root driver (scale.py):
#   {"op":"start","n":N,"inflight":K,"argv":[...],"timeout":S}
#       N sessions through the real helper, at most K between connect and their
#       first envelope (docs/PROTOCOL.md section 8: a client keeps at most 8 there);
#   {"op":"close","how":"stop"|"drop","timeout":S}
#       every started session at once: "stop" sends STOP on each in one loop and
#       then reads each to its terminal envelope and EOF; "drop" closes each
#       connection in one loop (the supervisor stops and proves the units gone).
# One event loop (epoll through selectors): no thread per session, and no
# select(), whose FD_SETSIZE of 1024 the descriptors pass at 1,000 sessions.
import collections
import json
import os
import resource
import selectors
import sys
import time

sys.path.insert(0, "/vm-tests/lib")
import standin  # noqa: E402  (Conn, spawn_helper, frame types, serve)

TERMINAL = ("exit", "error")
sessions = []          # the started sessions, kept between "start" and "close"


class Session:
    def __init__(self, index):
        self.index = index
        self.c = standin.Conn()
        self.envelopes = []        # {type, code, signal, result, unit} in order
        self.output = 0
        self.after_terminal = []   # frame types that came after the terminal envelope
        self.unexpected = []
        self.t_connect = None
        self.t_first = None

    def terminals(self):
        return [e for e in self.envelopes if e["type"] in TERMINAL]

    def drain(self):
        """Decodes every whole frame received so far."""
        while True:
            f = self.c.take_frame()
            if f is None:
                return
            ftype, payload = f
            if self.terminals():
                self.after_terminal.append(ftype)
            if ftype == standin.EVENT:
                env = json.loads(payload)
                self.envelopes.append({k: env.get(k) for k in ("type", "code", "signal", "result", "unit")
                                       if k in env})
                if self.t_first is None:
                    self.t_first = time.monotonic()
            elif ftype == standin.OUTPUT:
                self.output += len(payload)
            else:
                self.unexpected.append(ftype)

    def record(self):
        t = self.terminals()
        return {"i": self.index, "envelopes": [e["type"] + (":%s" % (e.get("code") if e.get("code") is not None
                                                                     else e.get("signal")))
                                               if e["type"] != "started" else "started" for e in self.envelopes],
                "terminals": len(t), "terminal": t[0] if t else None, "eof": self.c.eof,
                "after_terminal": self.after_terminal, "unexpected": self.unexpected, "output": self.output}


def loop(sel, waiting, done, deadline):
    """Reads the registered sessions until done(s) holds for every one in
    `waiting` (a set, emptied here) or the deadline passes."""
    while waiting and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
            s = key.data
            s.c.fill()
            s.drain()
            if s.c.eof:
                sel.unregister(s.c.sock)
            if s in waiting and (done(s) or s.c.eof):
                waiting.discard(s)


def start(req):
    n, inflight = req["n"], req.get("inflight", 8)
    argv = req.get("argv", ["sleep", "infinity"])
    deadline = time.monotonic() + req.get("timeout", 600)
    sel = selectors.DefaultSelector()
    pending, launched, refused, helper_failed = set(), 0, [], 0
    first_ms = []
    t0 = time.monotonic()
    dirfd = os.open("/home/byk", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        while (launched < n or pending) and time.monotonic() < deadline:
            while len(pending) < inflight and launched < n:
                s = Session(launched)
                launched += 1
                s.t_connect = time.monotonic()
                try:
                    s.c.connect()
                except OSError as e:
                    refused.append({"i": s.index, "connect_errno": e.errno})
                    continue
                status = standin.spawn_helper(s.c.sock, dirfd, argv, 80, 24)
                if status != 0:
                    helper_failed += 1
                sel.register(s.c.sock, selectors.EVENT_READ, s)
                pending.add(s)
            before = set(pending)
            loop(sel, pending, lambda s: bool(s.envelopes), min(deadline, time.monotonic() + 0.05))
            for s in before - pending:
                if s.envelopes and s.envelopes[0]["type"] == "started":
                    sessions.append(s)
                    first_ms.append((s.t_first - s.t_connect) * 1000)
                else:
                    first = s.envelopes[0] if s.envelopes else {}
                    refused.append({"i": s.index, "envelope": first, "eof": s.c.eof})
                    if not s.c.eof:
                        sel.unregister(s.c.sock)
                    s.c.sock.close()
    finally:
        os.close(dirfd)
        sel.close()
    codes = collections.Counter((r.get("envelope") or {}).get("code") or
                                ("connect_errno_%s" % r["connect_errno"] if "connect_errno" in r else "eof")
                                for r in refused)
    first_ms.sort()
    return {"n": n, "launched": launched, "started": len(sessions), "still_pending": len(pending),
            "refused": len(refused), "refused_codes": dict(codes), "first_refused": refused[:5],
            "helper_failed": helper_failed, "start_s": round(time.monotonic() - t0, 2),
            "started_ms_p50": round(first_ms[len(first_ms) // 2], 1) if first_ms else None,
            "started_ms_max": round(first_ms[-1], 1) if first_ms else None,
            "units": [s.envelopes[0].get("unit") for s in sessions]}


def close(req):
    how = req["how"]
    deadline = time.monotonic() + req.get("timeout", 300)
    live = list(sessions)
    sessions.clear()
    sel = selectors.DefaultSelector()
    # Anything that came while the sessions were held (nothing should have).
    for s in live:
        sel.register(s.c.sock, selectors.EVENT_READ, s)
    loop(sel, set(live), lambda s: False, time.monotonic() + 0.2)
    ended_early = [s.index for s in live if s.terminals() or s.c.eof]
    t0 = time.monotonic()
    if how == "drop":
        for s in live:
            s.c.sock.close()
        sel.close()
        return {"how": how, "sessions": len(live), "ended_while_held": ended_early,
                "close_s": round(time.monotonic() - t0, 4)}
    send_errors = 0
    for s in live:
        if not s.c.eof:
            try:
                s.c.send(standin.STOP)
            except OSError:   # the supervisor closed it first: judged by what was read
                send_errors += 1
    t_sent = time.monotonic() - t0
    waiting = {s for s in live if not s.c.eof}
    loop(sel, waiting, lambda s: False, deadline)   # to EOF: after the terminal envelope nothing may come
    sel.close()
    recs = [s.record() for s in live]
    for s in live:
        s.c.sock.close()
    return {"how": how, "sessions": len(live), "ended_while_held": ended_early,
            "stop_sent_s": round(t_sent, 4), "stop_send_errors": send_errors, "all_eof_s": round(time.monotonic() - t0, 2),
            "records": recs}


OPS = {"start": start, "close": close}


def handle(req):
    return OPS[req["op"]](req)


if __name__ == "__main__":
    # One connection per session: raise the soft descriptor limit to the hard
    # one, as Node does for the real application.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    standin.serve(lambda req, link: handle(req))
