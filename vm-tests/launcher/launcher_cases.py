#!/usr/bin/python3
"""The launcher as a REAL transient unit, case by case (run by launcher.sh).

Each case starts the installed /usr/local/libexec/opencode-pty-launcher the way
the supervisor does: StartTransientUnit over the system bus with one end of a
socketpair as StandardInputFileDescriptor and StandardOutputFileDescriptor, an
opened directory as StandardErrorFileDescriptor, User=byk,
Environment=COLUMNS/LINES, ExecStart = the launcher + one canonical encoded
argument per argv element, AddRef=yes + CollectMode=inactive-or-failed. Like
the supervisor, it first writes the one 'V' packet (the command's environment
overlay, empty unless a case gives one) into its end of an AF_UNIX
SOCK_SEQPACKET socketpair and sends the unit channel handoff on the stream
(one byte 'R' + the unit's end). It
reads the PTY stream to EOF, reads ExecMainCode/ExecMainStatus/Result,
Unref()s the unit and proves it is gone (NoSuchUnit).

Usage: launcher_cases.py CASE PROBE     exits 0 if the case holds; prints evidence."""
import base64
import os
import shutil
import socket
import struct
import sys
import tempfile
import time

import dbus

LAUNCHER = "/usr/local/libexec/opencode-pty-launcher"
USER, UID = "byk", 1000
CLD_EXITED = 1

bus = dbus.SystemBus()
manager = dbus.Interface(bus.get_object("org.freedesktop.systemd1", "/org/freedesktop/systemd1"),
                         "org.freedesktop.systemd1.Manager")


def env_packet(entries):
    """The unit channel's 'V' packet: count, then each b"NAME=VALUE" with its length."""
    return b"V" + struct.pack(">I", len(entries)) + b"".join(struct.pack(">I", len(e)) + e for e in entries)


def encode(raw):
    return "a" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


class Run:
    """One transient unit. `args`: raw argv elements (bytes), encoded here;
    `tokens`: launcher arguments passed as given (hostile cases)."""

    def __init__(self, workdir, args=None, tokens=None, cols="120", rows="40", stdin=None, handoff=True,
                 go=True, on_output=None, typed_after=None, overlay=()):
        tokens = list(tokens) if tokens is not None else [encode(a) for a in args]
        self.unit = "opencode-pty-vmtest-%s.service" % os.urandom(16).hex()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.channel, unit_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.channel.send(env_packet(overlay))
        if handoff:
            socket.send_fds(ours, [b"R"], [unit_end.fileno()])
        unit_end.close()
        dirfd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        env = [e for e in (cols and "COLUMNS=" + cols, rows and "LINES=" + rows) if e]
        props = dbus.Array([
            ("Description", dbus.String("opencode-pty launcher vm-test")),
            ("Type", dbus.String("exec")),
            ("User", dbus.String(USER)),
            ("ExecStart", dbus.Array([(dbus.String(LAUNCHER),
                                       dbus.Array([dbus.String(LAUNCHER)] + [dbus.String(t) for t in tokens],
                                                  signature="s"),
                                       dbus.Boolean(False))], signature="(sasb)")),
            ("StandardInputFileDescriptor", dbus.types.UnixFd(theirs.fileno())),
            ("StandardOutputFileDescriptor", dbus.types.UnixFd(theirs.fileno())),
            ("StandardErrorFileDescriptor", dbus.types.UnixFd(dirfd)),
            ("Environment", dbus.Array(env, signature="s")),
            ("AddRef", dbus.Boolean(True)),
            ("CollectMode", dbus.String("inactive-or-failed")),
        ], signature="(sv)")
        manager.StartTransientUnit(self.unit, "fail", props, dbus.Array([], signature="(sa(sv))"))
        # Every duplicate of the unit's end must go or EOF never arrives
        # (dbus-python keeps one in each UnixFd of the message).
        del props
        theirs.close()
        os.close(dirfd)
        # The supervisor's go (common/launch.h): the launcher execs nothing before it.
        if go:
            ours.sendall(b"G")
        if stdin is not None:
            ours.sendall(stdin)
            ours.shutdown(socket.SHUT_WR)  # script turns this EOF into ^D on the PTY
        ours.settimeout(120)
        self.output = b""
        while True:
            try:
                chunk = ours.recv(65536)
            except ConnectionResetError:
                # The launcher exited without reading all we sent (the go, or
                # input after a wrong first byte): AF_UNIX reports the unread
                # bytes as a reset. Everything it wrote arrived before.
                break
            if not chunk:
                break
            self.output += chunk
            if on_output is not None:
                on_output(self.output, self.channel)
            if typed_after is not None and typed_after[0] in self.output:
                ours.sendall(typed_after[1])  # typed once, after the command printed the mark
                typed_after = None
        ours.close()

        obj = bus.get_object("org.freedesktop.systemd1", manager.GetUnit(self.unit))
        get = dbus.Interface(obj, "org.freedesktop.DBus.Properties").Get
        deadline = time.monotonic() + 30
        while True:  # EOF may come a moment before systemd has reaped the process
            self.state = str(get("org.freedesktop.systemd1.Unit", "ActiveState"))
            if self.state in ("inactive", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.code = int(get("org.freedesktop.systemd1.Service", "ExecMainCode"))
        self.status = int(get("org.freedesktop.systemd1.Service", "ExecMainStatus"))
        self.result = str(get("org.freedesktop.systemd1.Service", "Result"))
        dbus.Interface(obj, "org.freedesktop.systemd1.Unit").Unref()
        self.gone = False
        while time.monotonic() < deadline:
            try:
                manager.GetUnit(self.unit)
            except dbus.exceptions.DBusException as e:
                if e.get_dbus_name() != "org.freedesktop.systemd1.NoSuchUnit":
                    raise
                self.gone = True
                break
            time.sleep(0.05)

    def __str__(self):
        return "%s: %s ExecMainCode=%d ExecMainStatus=%d Result=%s gone=%s output=%r" % (
            self.unit, self.state, self.code, self.status, self.result, self.gone, self.output[:600])


def read_report(workdir):
    """tests/probe's report (hex-encoded lines) as a dict of lists."""
    report = {}
    with open(os.path.join(workdir, "probe-report")) as f:
        for line in f:
            key, _, rest = line.rstrip("\n").partition(" ")
            report.setdefault(key, []).append(rest)
    return report


failures = []


def expect(what, ok, evidence=""):
    print("%s: %s%s" % ("ok" if ok else "FAILED", what, " -- " + str(evidence) if not ok else ""))
    if not ok:
        failures.append(what)


def expect_exit(r, status):
    expect("exit status %d in ExecMainStatus" % status,
           r.code == CLD_EXITED and r.status == status and r.result == ("success" if status == 0 else "exit-code"),
           r)
    expect("unit collected after Unref (NoSuchUnit)", r.gone, r)


def case_environment(workdir, probe):
    """tty on 0,1,2; cwd; only fds 0,1,2; exact environment; window size; uid."""
    r = Run(workdir, [probe.encode()])
    print(r)
    expect_exit(r, 0)
    expect("probe ran", b"probe-done" in r.output, r.output)
    rep = read_report(workdir)
    expect("report complete", "end" in rep, rep)
    cwd = bytes.fromhex(rep["cwd"][0]).decode()
    expect("cwd is the passed directory", os.path.realpath(cwd) == os.path.realpath(workdir), cwd)
    ttys = dict(t.split(" ", 1) for t in rep["tty"])
    expect("fd 0, 1, 2 are the same /dev/pts/N",
           ttys["0"].startswith("/dev/pts/") and ttys["1"] == ttys["0"] and ttys["2"] == ttys["0"], ttys)
    fds = {int(f.split(" ")[0]): bytes.fromhex(f.split(" ")[1]).decode() for f in rep["fd"]}
    expect("only fds 0, 1, 2, all the terminal",
           sorted(fds) == [0, 1, 2] and all(t == ttys["0"] for t in fds.values()), fds)
    env = sorted(bytes.fromhex(e).decode() for e in rep.get("env", []))
    want = sorted(["HOME=/home/byk", "USER=byk", "LOGNAME=byk",
                   "SHELL=/bin/sh", "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=xterm-256color",
                   "LANG=C.UTF-8"])
    expect("environment is exactly the allowlist", env == want, env)
    expect("window 40x120 set on the terminal", rep["winsize"] == ["40 120"], rep["winsize"])
    expect("runs as byk", rep["uid"] == [str(UID)], rep["uid"])
    expect("default signal state", rep["sigblk"] == ["0000000000000000"] and rep["sigign"] == ["0000000000000000"],
           (rep["sigblk"], rep["sigign"]))
    expect("command is the terminal's foreground group", rep["pgrp-is-foreground"] == ["1"], rep)
    # The application's overlay, on a real unit: it replaces fixed values and
    # adds its own; the names of the application's unit are dropped.
    os.unlink(os.path.join(workdir, "probe-report"))
    r = Run(workdir, [probe.encode()], overlay=[b"OPENCODE_ENV_MARKER=vm-overlay", b"TERM=dumb",
                                                b"INVOCATION_ID=bogus", b"TRIGGER_UNIT=x.path"])
    print(r)
    expect_exit(r, 0)
    env = sorted(bytes.fromhex(e).decode() for e in read_report(workdir).get("env", []))
    want = sorted(["HOME=/home/byk", "USER=byk", "LOGNAME=byk", "SHELL=/bin/sh",
                   "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "LANG=C.UTF-8",
                   "OPENCODE_ENV_MARKER=vm-overlay"])
    expect("the overlay is applied to the command", env == want, env)


def hostile_vectors(probe):
    big = bytes((1 + i % 255) for i in range(4096))
    return [probe.encode(), b"with space", b"'single'", b'"double"', b"$(touch pwned)", b"`touch pwned`",
            b"; touch pwned", b"*", b"", b"-rf", b"--exec", b"line1\nline2", b"\xff\xfe\x80", b"\xc3\xa9",
            b"\x1b[31m", big, b""]


def case_argv(workdir, probe):
    """Hostile argv vectors arrive byte-exact through ExecStart, script and sh."""
    argv = hostile_vectors(probe)
    r = Run(workdir, argv)
    print(r)
    expect_exit(r, 0)
    got = [bytes.fromhex(a) for a in read_report(workdir).get("arg", [])]
    expect("argv byte-exact (%d elements)" % len(argv), got == argv, got[:5])
    expect("nothing was evaluated", not os.path.exists(os.path.join(workdir, "pwned")))


def case_argv_bounds(workdir, probe):
    """1,000 arguments, and one argument of kMaxArgBytes (32 KiB)."""
    argv = [probe.encode()] + [("arg %d" % i).encode() for i in range(1000)]
    r = Run(workdir, argv)
    print(str(r)[:300])
    expect_exit(r, 0)
    got = [bytes.fromhex(a) for a in read_report(workdir).get("arg", [])]
    expect("1,000 arguments byte-exact", got == argv, len(got))
    os.unlink(os.path.join(workdir, "probe-report"))
    argv = [probe.encode(), b"m" * 32768]
    r = Run(workdir, argv)
    print(str(r)[:300])
    expect_exit(r, 0)
    got = [bytes.fromhex(a) for a in read_report(workdir).get("arg", [])]
    expect("a 32 KiB argument byte-exact", got == argv, [len(a) for a in got])


def case_size(workdir, probe):
    r = Run(workdir, [b"stty", b"size"], cols="132", rows="43")
    print(r)
    expect_exit(r, 0)
    expect("stty size inside shows 43 132", b"43 132\r\n" in r.output, r.output)
    r = Run(workdir, [b"stty", b"size"], cols=None, rows=None)
    print(r)
    expect_exit(r, 0)
    expect("without COLUMNS/LINES the size is 24x80", b"24 80\r\n" in r.output, r.output)


def case_exit(workdir, probe):
    for n in (0, 1, 3, 7, 255):
        r = Run(workdir, [b"/bin/sh", b"-c", b"exit %d" % n])
        print(r)
        expect_exit(r, n)
    r = Run(workdir, [b"opencode-no-such-command"])
    print(r)
    expect_exit(r, 127)
    expect("not found is reported on the PTY", b"opencode-no-such-command: command not found" in r.output, r.output)
    with open(os.path.join(workdir, "not-executable"), "w") as f:
        f.write("#!/bin/sh\n")
    r = Run(workdir, [b"./not-executable"])
    print(r)
    expect_exit(r, 126)
    for sig in (2, 15):
        r = Run(workdir, [b"/bin/sh", b"-c", b"kill -%d $$; sleep 5" % sig])
        print(r)
        expect_exit(r, 128 + sig)


def case_input(workdir, probe):
    """Input reaches the command through the PTY; half-closing the stream is ^D."""
    r = Run(workdir, [b"cat"], stdin=b"hello through the pty\n")
    print(r)
    expect_exit(r, 0)
    expect("echo and cat output both arrive", r.output.count(b"hello through the pty\r\n") == 2, r.output)


def case_nogo(workdir, probe):
    """Without the supervisor's go (the stream ends first, or carries another
    byte) the launcher exits 123 and nothing of the command runs."""
    marker = os.path.join(workdir, "marker").encode()
    for stdin in (b"", b"touch\n"):
        r = Run(workdir, [b"/usr/bin/touch", marker], stdin=stdin, go=False)
        print(r)
        expect_exit(r, 123)
        expect("reason on the PTY stream", b"no go from the supervisor" in r.output, r.output)
        expect("nothing ran (stdin %r)" % stdin, not os.path.exists(marker))


def case_rejected(workdir, probe):
    """Non-canonical arguments end the unit before anything runs."""
    marker = os.path.join(workdir, "marker").encode()
    cases = [("a$(id)", 106, b"bad_alphabet"), ("aZh", 108, b"non_canonical"), ("aZm9v=", 106, b"bad_alphabet"),
             ("", 105, b"bad_prefix"), ("aZ", 107, b"bad_length")]
    for token, status, reason in cases:
        r = Run(workdir, tokens=[encode(b"/usr/bin/touch"), encode(marker), token])
        print(r)
        expect_exit(r, status)
        expect("reason %s on the PTY stream" % reason.decode(), reason in r.output, r.output)
        expect("nothing ran (%r)" % token, not os.path.exists(marker))
    r = Run(workdir, [b"/usr/bin/touch", marker])
    print(r)
    expect_exit(r, 0)
    expect("control: the same command without the bad token runs", os.path.exists(marker))


def unit_packets(channel):
    """Every packet the unit sent on the channel, until it hangs up."""
    channel.settimeout(10)
    out = []
    while True:
        try:
            p = channel.recv(16)
        except ConnectionResetError:  # the unit closed it with the 'V' packet unread: once
            continue
        if p == b"":
            return out
        out.append(p)


def case_resize(workdir, probe):
    """Live resize through the channel: three sizes in order; no handoff -> 123."""
    steps = [(b"40 120", 100, 30), (b"30 100", 132, 50), (b"50 132", 80, 24)]
    state = {"next": 0}

    def step(out, channel):
        i = state["next"]
        if i < len(steps) and steps[i][0] in out:
            channel.send(b"W" + struct.pack(">HH", steps[i][1], steps[i][2]))
            state["next"] = i + 1
    script = (b"n=0; trap 'stty size; n=$((n+1)); if [ $n -ge 3 ]; then exit 0; fi' WINCH; "
              b"stty size; while :; do sleep 0.05; done")
    r = Run(workdir, [b"/bin/sh", b"-c", script], on_output=step)
    print(r)
    expect_exit(r, 0)
    got = [l.strip() for l in r.output.split(b"\n") if l.strip() in (b"40 120", b"30 100", b"50 132", b"24 80")]
    expect("every size printed in order by the WINCH trap", got == [b"40 120", b"30 100", b"50 132", b"24 80"], got)
    packets = unit_packets(r.channel)
    expect("the monitor reported the exec and the exit 0, then the channel hung up (no monitor left)",
           len(packets) == 2 and packets[0][:1] == b"E" and packets[1] == b"Xx\x00", packets)
    marker = os.path.join(workdir, "marker").encode()
    r = Run(workdir, [b"/usr/bin/touch", marker], handoff=False)
    print(r)
    expect_exit(r, 123)
    expect("reason on the PTY stream", b"unit channel" in r.output, r.output)
    expect("nothing ran without the handoff", not os.path.exists(marker))


def case_signals(workdir, probe):
    """Signals through the channel reach the command only; ^C reaches its group only;
    the exact end comes back (issue #20)."""
    state = {"step": 0}

    def usr1(out, channel):
        if state["step"] == 0 and b"ready" in out:
            channel.send(b"K" + bytes([10]))
            state["step"] = 1
        elif state["step"] == 1 and b"got-usr1" in out:
            channel.send(b"K" + bytes([15]))
            state["step"] = 2
    r = Run(workdir, [b"/bin/sh", b"-c", b"trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.05; done"],
            on_output=usr1)
    print(r)
    expect("USR1 ran the trap and the command went on, then TERM", state["step"] == 2, r.output)
    expect("script did not end the session ('Session terminated' absent)", b"Session terminated" not in r.output, r.output)
    expect_exit(r, 128 + 15)
    packets = unit_packets(r.channel)
    expect("the monitor answered each K (D: its kill() ran), then the exit is reported as killed by TERM",
           packets[1:] == [b"D\x0a", b"D\x0f", b"Xk\x0f"] and packets[0][:1] == b"E", packets)
    r = Run(workdir, [b"/bin/sh", b"-c", b"trap 'echo caught; exit 3' INT; echo ready; while :; do sleep 0.05; done"],
            typed_after=(b"ready", b"\x03"))
    print(r)
    expect("^C reached the command, which caught it", b"caught" in r.output, r.output)
    expect_exit(r, 3)
    packets = unit_packets(r.channel)
    expect("the exit is reported as code 3 (not 130)", len(packets) == 2 and packets[1] == b"Xx\x03", packets)
    r = Run(workdir, [b"/bin/sh", b"-c", b"kill -SEGV $$"])
    print(r)
    packets = unit_packets(r.channel)
    expect("a SEGV is reported as the signal", len(packets) == 2 and packets[1][:2] in (b"Xc", b"Xk") and packets[1][2] == 11,
           packets)


CASES = {"resize": case_resize, "signals": case_signals, "environment": case_environment, "argv": case_argv, "argv-bounds": case_argv_bounds,
         "size": case_size, "exit": case_exit, "input": case_input, "rejected": case_rejected, "nogo": case_nogo}

if __name__ == "__main__":
    name, probe = sys.argv[1], sys.argv[2]
    workdir = tempfile.mkdtemp(prefix="pty-%s-" % name, dir="/home/byk")
    os.chown(workdir, UID, UID)
    os.chmod(workdir, 0o755)
    try:
        CASES[name](workdir, probe)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        print("failed:", "; ".join(failures))
        sys.exit(1)
    print("all expectations held")
