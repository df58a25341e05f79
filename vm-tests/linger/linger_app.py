#!/usr/bin/python3
# vm-tests/linger/linger_app.py: the application stand-in for the linger suite
# (linger.sh, issue #28 part 1). Runs as the MainPID of opencode-v2.service
# (User=byk) and holds every session, as the application must; each is a
# vm-tests/lib/standin.py Session (the connection, the real client helper, the
# frames). One JSON request per control connection (standin.serve);
# session A lives across requests. Every time is measured here and judged by
# linger.sh against its bounds.
import json
import os
import sys
import threading
import time

sys.path.insert(0, "/vm-tests/lib")
import standin  # noqa: E402  (Session, INPUT, EOF, serve)

RUN = "/run/opencode-test"
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lingering_peer.py")
state = {"a": None, "echoes": 0}


def echo(s, cap):
    """One line through session A's `cat`: seconds until the PTY echo and cat's
    copy came back (waiting at most `cap`), or None."""
    state["echoes"] += 1
    token = b"a-echo-%d" % state["echoes"]
    t0 = time.monotonic()
    s.c.send(standin.INPUT, token + b"\n")
    if s.pump(lambda: token + b"\r\n" + token in s.out, t0 + cap):
        return round(time.monotonic() - t0, 3)
    return None


def summary(s, t0=None):
    r = {k: s.rec.get(k) for k in ("helper_status", "envelopes", "eof", "timeout", "terminals")}
    r["terminal"] = s.terminal()
    if t0 is not None:
        r["seconds"] = round(time.monotonic() - t0, 3)
    return r


def one_session(argv, cap):
    t0 = time.monotonic()
    s = standin.Session(argv, cap)
    if s.connect():
        s.start()
        s.finish()
    return summary(s, t0)


def open_a(req):
    s = standin.Session(["cat"], 3600)
    ok = s.connect() and (s.start() or True) and s.started()
    state["a"] = s
    return {"started": ok, "a": summary(s), "echo_s": echo(s, req.get("cap", 30)) if ok else None}


def close_a(req):
    s = state["a"]
    s.c.send(standin.EOF)  # cat ends: exit 0
    s.deadline = time.monotonic() + req.get("cap", 30)
    s.finish()
    return summary(s)


def lingering_round(req):
    """Session B runs lingering_peer.py; once it has armed (a refusal arrived,
    the supervisor holds the lingering socket), session A's echo and a new
    session C are timed at the same moment, each with its own thread."""
    tag, cap = req["tag"], req.get("cap", 90)
    for suffix in ("-armed.json", "-done.json", "-release"):
        try:
            os.unlink(os.path.join(RUN, tag + suffix))
        except FileNotFoundError:
            pass
    with open(PEER) as f:
        source = f.read()
    argv = ["python3", "-c", source, RUN, tag, str(req["n"]), str(req["linger"]), str(req["hold"])]
    b = standin.Session(argv, cap + req["hold"])
    res = {}
    if not (b.connect() and (b.start() or True) and b.started()):
        b.finish()
        res["b"] = summary(b)
        return res
    armed = os.path.join(RUN, tag + "-armed.json")
    until = time.monotonic() + req.get("arm_timeout", 90)
    # B's output is drained meanwhile; its end before arming is a failure.
    while (not os.path.exists(armed) and time.monotonic() < until and b.terminal() is None
           and not b.rec["eof"]):
        b.pump(lambda: b.terminal() is not None, time.monotonic() + 0.05)
    if not os.path.exists(armed):
        b.finish()
        res["b"] = summary(b)
        res["b_output"] = bytes(b.out[-2000:]).decode("utf-8", "replace")
        return res
    with open(armed) as f:
        res["armed"] = json.load(f)
    res["armed_seen_after_s"] = round(time.monotonic() - res["armed"]["t"], 3)
    c_out = {}
    c = threading.Thread(target=lambda: c_out.update(one_session(["true"], cap)))
    c.start()
    res["a_echo_s"] = echo(state["a"], cap)
    c.join()
    res["c"] = c_out
    open(os.path.join(RUN, tag + "-release"), "w").close()
    b.finish()
    res["b"] = summary(b)
    res["b_output"] = bytes(b.out[-2000:]).decode("utf-8", "replace")
    try:
        with open(os.path.join(RUN, tag + "-done.json")) as f:
            res["done"] = json.load(f)
    except FileNotFoundError:
        res["done"] = None
    return res


OPS = {"session": lambda req: one_session(req["argv"], req.get("cap", 30)),
       "open_a": open_a, "close_a": close_a, "round": lingering_round}

if __name__ == "__main__":
    standin.serve(lambda req, link: OPS[req["op"]](req))
