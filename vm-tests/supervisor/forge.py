#!/usr/bin/python3
# Forges systemd signals on the real system bus from another connection (root
# here): `forge.py UNIT COUNT`. One UnitRemoved, then COUNT more signals of
# every kind the supervisor listens for, all naming UNIT. The supervisor must
# treat none of them as evidence (its session keeps running) and stay bounded.
import sys

import dbus
import dbus.lowlevel

unit = sys.argv[1]
count = int(sys.argv[2])
bus = dbus.SystemBus()
path = "/org/freedesktop/systemd1/unit/" + "".join(
    c if c.isalnum() else "_%02x" % ord(c) for c in unit)


def send(obj, iface, member, *args):
    msg = dbus.lowlevel.SignalMessage(obj, iface, member)
    msg.append(*args)
    bus.send_message(msg)


send("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "UnitRemoved",
     unit, dbus.ObjectPath(path))
for i in range(count):
    send("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "UnitRemoved",
         unit, dbus.ObjectPath(path))
    send("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "JobRemoved",
         dbus.UInt32(i + 1), dbus.ObjectPath("/org/freedesktop/systemd1/job/%d" % (i + 1)),
         unit, "done")
    send(path, "org.freedesktop.DBus.Properties", "PropertiesChanged",
         "org.freedesktop.systemd1.Unit",
         dbus.Dictionary({"ActiveState": "inactive"}, signature="sv"),
         dbus.Array([], signature="s"))
bus.flush()
print("forged", 1 + 3 * count, "signals for", unit)
