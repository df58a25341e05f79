#!/usr/bin/python3
# vm-tests/lib/driver.py: what the root drivers of the real-systemd suites
# (faults/faults.py, faults/soak.py, scale/scale.py) share: the units and
# sockets they look at, the invariant check's tolerances, systemctl, busctl,
# journalctl and /proc reads of the supervisor, and the control connection to
# the application stand-in (request: one JSON request, MARK/GO lines, one JSON
# answer). Drivers import it with sys.path.insert(0, "/vm-tests/lib").
import json
import os
import re
import socket
import subprocess
import time

CONTROL = "/run/opencode-test/control.sock"
SUPERVISOR_SOCK = "/run/opencode-pty/supervisor.sock"
SUP = "opencode-pty-supervisor.service"
APP = "opencode-v2.service"
SLICE = "opencode-pty.slice"
# Tolerances of the invariant check after each repetition (the fault campaign,
# the scale suite; stated in vm-tests/README.md).
FD_TOL = 2
RSS_ANON_TOL_KB = 2048
RSS_TOL_KB = 4096
SESSION_UNIT = re.compile(r"^opencode-pty-[0-9a-f]{32}\.service$")
PRODUCT_UNITS = {"opencode-pty-supervisor.service", "opencode-pty-supervisor.socket", "opencode-pty.slice"}


def run(*argv):
    return subprocess.run(argv, capture_output=True, text=True)


def supervisor_pid():
    return int(run("systemctl", "show", "-P", "MainPID", SUP).stdout.strip() or 0)


def app_pid():
    return int(run("systemctl", "show", "-P", "MainPID", APP).stdout.strip() or 0)


def status_text():
    return run("systemctl", "show", "-P", "StatusText", SUP).stdout.strip()


def leftover_units():
    """Every opencode-pty-* unit systemd knows, in any load state, but the product's own."""
    out = run("systemctl", "list-units", "--all", "--plain", "--no-legend", "opencode-pty-*").stdout
    return [l.split()[0] for l in out.splitlines() if l.split() and l.split()[0] not in PRODUCT_UNITS]


def unit_gone(unit):
    p = run("busctl", "--system", "call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager", "GetUnit", "s", unit)
    return p.returncode != 0 and ("NoSuchUnit" in p.stderr or "not loaded" in p.stderr)


def resources(pid):
    r = {"pid": pid}
    try:
        r["fds"] = len(os.listdir("/proc/%d/fd" % pid))
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon"):
                    r[k] = int(v.split()[0])
    except OSError as e:
        r["error"] = str(e)
    return r


def journal_cursor():
    out = run("journalctl", "-n", "0", "--show-cursor", "-o", "cat").stdout
    return next(l[len("-- cursor: "):] for l in out.splitlines() if l.startswith("-- cursor: "))


def sup_journal(cursor):
    """(MESSAGE, UNIT) of the supervisor's entries after CURSOR. Filtered here:
    --after-cursor with a field match drops the first match on systemd 252."""
    p = subprocess.run(["journalctl", "--no-pager", "--after-cursor", cursor, "-o", "json"],
                       capture_output=True, text=True)
    out = []
    for line in p.stdout.splitlines():
        e = json.loads(line)
        if e.get("_SYSTEMD_UNIT") == SUP:
            m = e.get("MESSAGE")
            out.append((m if isinstance(m, str) else str(m), e.get("UNIT")))
    return out


def wait_until(seconds, pred):
    end = time.monotonic() + seconds
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.1)


def request(req, on_mark=None, timeout=600):
    """One request to the app; on_mark(what) runs at each MARK, then GO is sent back."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(CONTROL)
    s.sendall(json.dumps(req).encode() + b"\n")
    f = s.makefile("rb")
    try:
        while True:
            line = f.readline()
            if not line:
                return {"exception": "control connection closed without an answer"}
            if line.startswith(b"MARK "):
                if on_mark:
                    on_mark(line[5:].strip().decode())
                s.sendall(b"GO\n")
                continue
            return json.loads(line)
    except socket.timeout:
        return {"exception": "no answer from the app within %d s" % timeout}
    finally:
        s.close()

