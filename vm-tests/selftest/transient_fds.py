#!/usr/bin/python3
"""Starts a transient unit over D-Bus whose stdin and stdout are our socketpair
end, as User=byk, feeds it a line, reads its output to EOF, and proves the
unit is gone afterwards. Prints the output and the facts; exits non-zero on
any deviation.

Usage: transient_fds.py USER EXPECTED_UID"""
import os
import socket
import sys
import time

import dbus

user, expected_uid = sys.argv[1], sys.argv[2]
unit = "vmtests-selftest-%s.service" % os.urandom(8).hex()

bus = dbus.SystemBus()
systemd = bus.get_object("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
manager = dbus.Interface(systemd, "org.freedesktop.systemd1.Manager")

ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
props = dbus.Array([
    ("Description", dbus.String("vm-tests self-test transient unit")),
    ("Type", dbus.String("exec")),
    ("User", dbus.String(user)),
    ("ExecStart", dbus.Array([(dbus.String("/bin/sh"),
                               dbus.Array([dbus.String(s) for s in
                                           ("/bin/sh", "-c", "id -u; cat")], signature="s"),
                               dbus.Boolean(False))], signature="(sasb)")),
    ("StandardInputFileDescriptor", dbus.types.UnixFd(theirs.fileno())),
    ("StandardOutputFileDescriptor", dbus.types.UnixFd(theirs.fileno())),
    ("StandardError", dbus.String("journal")),
    ("CollectMode", dbus.String("inactive-or-failed")),
], signature="(sv)")
job = manager.StartTransientUnit(unit, "fail", props, dbus.Array([], signature="(sa(sv))"))
# Every copy of the unit's end must go or EOF never arrives: ours, and the
# duplicates dbus-python holds in the UnixFd objects of the message.
del props
theirs.close()
print("started", unit, "job", job)

ours.sendall(b"hello from the harness\n")
ours.shutdown(socket.SHUT_WR)
ours.settimeout(60)
out = b""
while True:
    chunk = ours.recv(4096)
    if not chunk:
        break
    out += chunk
ours.close()
print("output:", repr(out))
want = ("%s\nhello from the harness\n" % expected_uid).encode()
if out != want:
    print("FAIL: expected", repr(want))
    sys.exit(1)

# The unit must be collected: GetUnit answers NoSuchUnit within a bound.
deadline = time.monotonic() + 30
while True:
    try:
        path = manager.GetUnit(unit)
        state = bus.get_object("org.freedesktop.systemd1", path).Get(
            "org.freedesktop.systemd1.Unit", "ActiveState",
            dbus_interface="org.freedesktop.DBus.Properties")
    except dbus.exceptions.DBusException as e:
        if e.get_dbus_name() == "org.freedesktop.systemd1.NoSuchUnit":
            print("unit gone: NoSuchUnit")
            break
        raise
    if time.monotonic() > deadline:
        print("FAIL: unit still loaded, ActiveState", state)
        sys.exit(1)
    time.sleep(0.1)
