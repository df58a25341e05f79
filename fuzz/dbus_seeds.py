#!/usr/bin/env python3
# Writes fuzz/corpus/dbus_identity/: programs for fuzz/dbus_identity.cc, whose
# inputs are opaque bytes. Each encoder below mirrors one reader of that
# file's Program grammar, so a seed says in words what message it builds.
# Run from anywhere; it rewrites the directory's files (same bytes each time).
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "dbus_identity")
STATES = ["active", "running", "inactive", "dead", "activating"]  # kStates
NAMES = ["ActiveState", "SubState", "InvocationID", "MainPID", "ControlGroup",
         "Id", "ExecMainPID", "Job", "ExecStart"]                  # kNames
PATH_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
TYPES = ["b", "i", "u", "x", "t", "s", "o", "as", "ay", "a(sasbttttuii)", "(uo)",
         "y", "n", "q", "d", "g", "v", "a{sv}", "(ss)", "ai"]       # AppendVariant cases


def byte(v):
    return bytes([v])


def string(s):  # Str(): odd flag + state index, or even flag + length + bytes
    if s in STATES:
        return byte(1) + byte(STATES.index(s))
    b = s.encode()
    assert len(b) < 65
    return byte(0) + byte(len(b)) + b


def path(p):  # Path(): segment count, then per segment (length - 1) and char indexes
    segs = [x for x in p.split("/") if x]
    assert len(segs) < 4
    out = byte(len(segs))
    for sg in segs:
        assert 1 <= len(sg) <= 8
        out += byte(len(sg) - 1) + bytes(PATH_CHARS.index(c) for c in sg)
    return out


def blob(b):  # Bytes(): odd flag means exactly 16, else length (< 41)
    if len(b) == 16:
        return byte(1) + b
    assert len(b) < 41
    return byte(0) + byte(len(b)) + b


def variant(t, v):
    out = byte(TYPES.index(t))
    if t == "b": out += byte(1 if v else 0)
    elif t == "i": out += struct.pack(">i", v)
    elif t == "u": out += struct.pack(">I", v)
    elif t == "x": out += struct.pack(">q", v)
    elif t == "t": out += struct.pack(">Q", v)
    elif t in ("s", "v"): out += string(v)
    elif t == "o": out += path(v)
    elif t == "as": out += byte(len(v)) + b"".join(string(x) for x in v)
    elif t in ("ay", "ai"): out += blob(v)
    elif t == "a(sasbttttuii)":
        out += byte(len(v))
        for exe, argv, ignore in v:  # then 4 timestamps, pid, code, status
            out += string(exe) + byte(len(argv)) + b"".join(string(a) for a in argv)
            out += byte(ignore) + bytes(4 * 8 + 3 * 4)
    elif t == "(uo)": out += struct.pack(">I", v[0]) + path(v[1])
    elif t == "y": out += byte(v)
    elif t in ("n", "q"): out += struct.pack(">H", v)
    elif t == "d": out += struct.pack(">d", v)
    elif t == "g": out += byte(v)
    elif t in ("a{sv}", "(ss)"): out += string(v[0]) + string(v[1])
    return out


def reply(entries, shape=0):  # BuildReply(): shape 0-3 a{sv}, 4 + trailing u, 5-7 not a{sv}
    if shape >= 5:
        return byte(shape)
    assert len(entries) <= 12
    out = byte(shape) + byte(len(entries))
    for name, t, v in entries:
        out += byte(NAMES.index(name)) if name in NAMES else byte(len(NAMES)) + string(name)
        out += variant(t, v)
    return out


def peer(same_pid=True, uid_1000=True, same_cgroup=True, alive=True, uid=0, cgroup=""):
    out = byte(1) if same_pid else byte(0) + struct.pack(">I", 1)
    out += byte(1) if uid_1000 else byte(0) + struct.pack(">I", uid)
    out += byte(1) if same_cgroup else byte(0) + string(cgroup)
    return out + byte(1 if alive else 0)


def identity(unit, service, shape_unit=0, shape_service=0, facts=b""):
    return byte(0) + reply(unit, shape_unit) + reply(service, shape_service) + facts


def pidfd(p, unit_id, inv, shape):  # FuzzUnitByPidfd(): shape 0 (o,s,ay), 1 no ay, 2 (s,s,ay), 3 ai
    return byte(1) + path(p) + string(unit_id) + blob(inv) + byte(shape)


INV = bytes(range(0x10, 0x20))
CG = "/system.slice/opencode-v2.service"
UNIT = [("ActiveState", "s", "active"), ("SubState", "s", "running"), ("InvocationID", "ay", INV)]
SERVICE = [("MainPID", "u", 4242), ("ControlGroup", "s", CG)]

SEEDS = {
    "identity-ok": identity(UNIT, SERVICE, facts=peer()),
    "identity-ok-peer-root": identity(UNIT, SERVICE, facts=peer(uid_1000=False, uid=0)),
    "identity-ok-peer-other-cgroup": identity(UNIT, SERVICE, facts=peer(same_cgroup=False, cgroup="/user.slice")),
    "identity-ok-peer-exited": identity(UNIT, SERVICE, facts=peer(alive=False)),
    "identity-inactive": identity(
        [("ActiveState", "s", "inactive"), ("SubState", "s", "dead"), ("InvocationID", "ay", INV)],
        [("MainPID", "u", 0), ("ControlGroup", "s", "")], facts=peer()),
    "controlgroup-on-unit": identity(UNIT + [("ControlGroup", "s", CG)], SERVICE),
    "invocation-15-bytes": identity(UNIT[:2] + [("InvocationID", "ay", INV[:15])], SERVICE),
    "mainpid-string": identity(UNIT, [("MainPID", "s", "4242"), ("ControlGroup", "s", CG)]),
    "mainpid-int32": identity(UNIT, [("MainPID", "i", 4242), ("ControlGroup", "s", CG)]),
    "activestate-object-path": identity([("ActiveState", "o", "/active")] + UNIT[1:], SERVICE),
    "duplicate-property": identity(UNIT + [("ActiveState", "s", "active")], SERVICE),
    "trailing-after-map": identity(UNIT, SERVICE, 4, 4, peer()),
    "body-a{ss}": identity([], SERVICE, shape_unit=5),
    "body-string": identity(UNIT, [], shape_service=6),
    "body-empty": identity([], SERVICE, shape_unit=7),
    "every-type": identity(
        UNIT + [("Id", "s", "opencode-v2.service"), ("Job", "(uo)", (0, "/")),
                ("ExecStart", "a(sasbttttuii)", [("/usr/bin/node", ["node", "server.js"], 0),
                                                 ("/bin/true", [], 1)]),
                ("Names", "as", ["opencode-v2.service", "x"]),
                ("Following", "o", "/org/sd1/unit"), ("CanStart", "b", True),
                ("NRestarts", "u", 3), ("ExecMainCode", "i", -1), ("MemoryCurrent", "t", 2**63)],
        SERVICE + [("ExecMainPID", "u", 4242), ("OOMScoreAdjust", "x", -5), ("Byte", "y", 7),
                   ("Short", "n", 1), ("UShort", "q", 2), ("Double", "d", 1.5), ("Sig", "g", 1),
                   ("Nested", "v", "x"), ("Map", "a{sv}", ("k", "v")), ("Pair", "(ss)", ("a", "b"))],
        facts=peer()),
    "pidfd-ok": pidfd("/sd1/unit/oc_2dv2", "opencode-v2.service", INV, 0),
    "pidfd-short-invocation": pidfd("/x", "opencode-v2.service", INV[:8], 0),
    "pidfd-no-invocation": pidfd("/x", "opencode-v2.service", INV, 1),
    "pidfd-string-not-path": pidfd("/x", "opencode-v2.service", INV, 2),
    "pidfd-ai-not-ay": pidfd("/x", "opencode-v2.service", INV, 3),
}

os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    os.remove(os.path.join(OUT, old))
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"{len(SEEDS)} seeds in {OUT}")
