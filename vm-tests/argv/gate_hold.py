#!/usr/bin/python3
"""Holds the installed launcher at its gate (run by argv.sh, as root).

A real session's launcher waits for the supervisor's go (docs/SECURITY.md "The
read-back is a gate") with the encoded argv in its own command line; in a
session that wait lasts one read-back round trip, too short to look at. This
starts the launcher exactly as the supervisor does (StartTransientUnit,
User=byk, ExecStart = the launcher + "a" + base64url of each argv element, the
unit channel handoff 'R' first on the PTY stream, a directory as stderr) and
simply never sends the go: the launcher stays at the gate until RELEASE
exists. Then the stream is closed without a go (the launcher exits 123,
nothing of the command runs) and the unit is proven gone.

Usage: gate_hold.py STATE RELEASE ARG...
Writes "UNIT MAINPID" to STATE once the launcher waits; exits 0 once the
unit is gone (NoSuchUnit)."""
import base64
import os
import socket
import sys
import time

import dbus

LAUNCHER = "/usr/local/libexec/opencode-pty-launcher"


def encode(raw):
    return "a" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def main():
    state, release, args = sys.argv[1], sys.argv[2], [a.encode() for a in sys.argv[3:]]
    bus = dbus.SystemBus()
    manager = dbus.Interface(bus.get_object("org.freedesktop.systemd1", "/org/freedesktop/systemd1"),
                             "org.freedesktop.systemd1.Manager")
    unit = "opencode-pty-%s.service" % os.urandom(16).hex()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    channel, unit_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    socket.send_fds(ours, [b"R"], [unit_end.fileno()])
    unit_end.close()
    dirfd = os.open("/home/byk", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    props = dbus.Array([
        ("Description", dbus.String("opencode PTY gate hold (vm-tests/argv)")),
        ("Type", dbus.String("exec")),
        ("User", dbus.String("1000")),
        ("Slice", dbus.String("opencode-pty.slice")),
        ("ExecStart", dbus.Array([(dbus.String(LAUNCHER),
                                   dbus.Array([dbus.String(LAUNCHER)] + [dbus.String(encode(a)) for a in args],
                                              signature="s"),
                                   dbus.Boolean(False))], signature="(sasb)")),
        ("StandardInputFileDescriptor", dbus.types.UnixFd(theirs.fileno())),
        ("StandardOutputFileDescriptor", dbus.types.UnixFd(theirs.fileno())),
        ("StandardErrorFileDescriptor", dbus.types.UnixFd(dirfd)),
        ("Environment", dbus.Array(["COLUMNS=80", "LINES=24"], signature="s")),
        ("CollectMode", dbus.String("inactive-or-failed")),
    ], signature="(sv)")
    manager.StartTransientUnit(unit, "fail", props, dbus.Array([], signature="(sa(sv))"))
    del props  # dbus-python holds a duplicate of each UnixFd
    theirs.close()
    os.close(dirfd)
    obj = bus.get_object("org.freedesktop.systemd1", manager.GetUnit(unit))
    get = dbus.Interface(obj, "org.freedesktop.DBus.Properties").Get
    # Type=exec: the job is done once the launcher runs; it then blocks in one
    # read(0) for the go. Wait until it sleeps there.
    pid = int(get("org.freedesktop.systemd1.Service", "MainPID"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "S":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    with open(state + ".tmp", "w") as f:
        f.write("%s %d\n" % (unit, pid))
    os.rename(state + ".tmp", state)
    deadline = time.monotonic() + 300
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    ours.close()  # no go: EOF at the gate, the launcher exits 123
    channel.close()
    status, gone = None, False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            status = int(get("org.freedesktop.systemd1.Service", "ExecMainStatus"))
            manager.GetUnit(unit)
        except dbus.exceptions.DBusException as e:
            if e.get_dbus_name() not in ("org.freedesktop.systemd1.NoSuchUnit",
                                         "org.freedesktop.DBus.Error.UnknownObject"):
                raise
            gone = True
            break
        time.sleep(0.05)
    print("gate hold: unit %s pid %d, last ExecMainStatus %s, gone %s" % (unit, pid, status, gone))
    return 0 if gone else 1


if __name__ == "__main__":
    sys.exit(main())
