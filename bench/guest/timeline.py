#!/usr/bin/python3
"""bench/guest/timeline.py STRACE-FILE: the start of stack sessions as the
supervisor saw it, from `strace -f -ttt -xx -s 65536` of the supervisor
(bench.sh's latency phase). Prints one JSON record (kind=start_timeline):
for each session (an accepted connection), every event in order with its
time in ms since accept4:

  - frames on the connection (START in, EVENT envelopes and OUTPUT out:
    docs/PROTOCOL.md section 2), by their 8-byte headers;
  - every D-Bus message on the connection to systemd, decoded from the wire
    (type, member, path, serial, reply_serial); a reply or error is named
    after the call it answers;
  - the first bytes read from the PTY stream (an fd from socketpair).

strace stops the supervisor at every system call, so the times are longer
than without it; they show the order and which step waits on which, not the
undisturbed durations (those are the latency cases and the journal split).
Never judges."""
import json
import re
import struct
import sys

LINE = re.compile(r"^(?:(\d+)\s+)?(\d+\.\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)(?:\s.*)?$")
BUF = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')
FRAME_TYPES = {1: "START", 2: "INPUT", 3: "SIGNAL", 4: "STOP", 5: "EOF", 6: "RESIZE",
               0x81: "OUTPUT", 0x82: "EVENT"}
MSG_TYPES = {1: "call", 2: "reply", 3: "error", 4: "signal"}


def buffers(args):
    return b"".join(bytes.fromhex(m.group(1).replace("\\x", "")) for m in BUF.finditer(args))


def align(n, a):
    return (n + a - 1) // a * a


def dbus_messages(data):
    """Complete D-Bus messages at the start of data: (list of dicts, bytes used)."""
    out, off = [], 0
    while len(data) - off >= 16:
        e = data[off:off + 1]
        if e not in (b"l", b"B"):
            return out, None  # not a D-Bus stream (or lost sync)
        end = "<" if e == b"l" else ">"
        mtype, _flags, ver = data[off + 1], data[off + 2], data[off + 3]
        body_len, serial, fields_len = struct.unpack(end + "III", data[off + 4:off + 16])
        if ver != 1 or mtype not in MSG_TYPES:
            return out, None
        total = align(16 + fields_len, 8) + body_len
        if len(data) - off < total:
            break
        msg = {"type": MSG_TYPES[mtype], "serial": serial}
        try:
            header_fields(data[off:off + total], 16, 16 + fields_len, end, msg)
        except (UnicodeDecodeError, struct.error, IndexError):
            return out, None  # bytes that only began like a D-Bus header
        out.append(msg)
        off += total
    return out, off


def header_fields(m, p, stop, end, msg):
    """The header fields of one message (m[p:stop]) into msg."""
    while p < stop:
        p = align(p, 8)
        code, siglen = m[p], m[p + 1]
        sig = m[p + 2:p + 2 + siglen].decode()
        p += 3 + siglen
        if sig in ("s", "o"):
            p = align(p, 4)
            (n,) = struct.unpack(end + "I", m[p:p + 4])
            val = m[p + 4:p + 4 + n].decode(errors="replace")
            p += 5 + n
        elif sig == "g":
            n = m[p]
            val = m[p + 1:p + 1 + n].decode()
            p += 2 + n
        elif sig == "u":
            p = align(p, 4)
            (val,) = struct.unpack(end + "I", m[p:p + 4])
            p += 4
        else:
            break
        key = {1: "path", 2: "interface", 3: "member", 4: "error", 5: "reply_serial",
               6: "destination", 7: "sender", 8: "signature", 9: "unix_fds"}.get(code)
        if key:
            msg[key] = val


UNFINISHED = re.compile(r"^(\d+)\s+(.*?)\s*<unfinished \.\.\.>$")
RESUMED = re.compile(r"^(\d+)\s+\d+\.\d+\s+<\.\.\. \w+ resumed>(.*)$")


def joined(lines):
    """strace -f splits a call that another thread interrupts into
    "PID T NAME(ARGS <unfinished ...>" and "PID T2 <... NAME resumed>REST";
    each such pair is given back as one line, at the time the call began
    (the supervisor's closer thread does this to the loop's recvmsg)."""
    started = {}
    for raw in lines:
        m = UNFINISHED.match(raw)
        if m:
            started[m.group(1)] = m.group(0)[:m.start(2)] + m.group(2)
            continue
        m = RESUMED.match(raw)
        if m and m.group(1) in started:
            yield started.pop(m.group(1)) + m.group(2)
            continue
        yield raw


def main():
    lines = list(joined(open(sys.argv[1], errors="replace").read().splitlines()))
    pending = {}        # (fd, dir) -> bytes not yet a whole message
    not_dbus = set()    # fds whose bytes are not D-Bus
    calls = {}          # serial of a call sent -> member
    client_fds, stream_fds, channel_fds = set(), set(), set()
    sessions, cur = [], None
    for raw in lines:
        m = LINE.match(raw)
        if not m:
            continue
        t, name, args, ret = float(m.group(2)) * 1000.0, m.group(3), m.group(4), int(m.group(5))
        fd = args.split(",", 1)[0].strip()
        fd = int(fd) if fd.isdigit() else None

        def ev(what, **kw):
            if cur is not None:
                cur["events"].append(dict({"ms": round(t - cur["t0"], 3), "what": what}, **kw))
        if name == "accept4" and ret >= 0:
            cur = {"t0": t, "events": []}
            sessions.append(cur)
            client_fds.add(ret)
            ev("accept4: connection fd %d" % ret)
            continue
        if name == "socketpair" and ret == 0:
            fds = re.search(r"\[(\d+),\s*(\d+)\]", args)
            if fds:
                seq = "SOCK_SEQPACKET" in args
                (channel_fds if seq else stream_fds).update(int(x) for x in fds.groups())
                ev("socketpair %s, %s (%s)" % (fds.group(1), fds.group(2),
                                               "unit channel" if seq else "PTY stream"))
            continue
        if name == "close" and fd is not None:
            if fd in client_fds:
                ev("close connection fd %d" % fd)
                client_fds.discard(fd)
            for k in [k for k in pending if k[0] == fd]:
                del pending[k]
            not_dbus.discard(fd)
            stream_fds.discard(fd)
            channel_fds.discard(fd)
            continue
        if name not in ("sendmsg", "recvmsg", "sendto", "recvfrom", "read", "write", "writev", "readv") or fd is None or ret <= 0:
            continue
        direction = "out" if name in ("sendmsg", "sendto", "write", "writev") else "in"
        data = buffers(args)[:ret]
        if fd in client_fds:
            # Frame headers at the start of a read or write (the supervisor
            # writes one frame per call; the helper's START arrives in one).
            if len(data) >= 8 and data[0] == 1 and data[1] in FRAME_TYPES:
                kind = FRAME_TYPES[data[1]]
                (n,) = struct.unpack(">I", data[4:8])
                info = {"frame": kind, "payload_bytes": n}
                if kind == "EVENT":
                    try:
                        info["envelope"] = json.loads(data[8:8 + n]).get("type")
                    except ValueError:
                        pass
                ev("connection %s %s" % (direction, kind), **info)
            elif direction == "in":
                ev("connection in (%d bytes)" % ret)
            continue
        if fd in stream_fds:
            if ret <= 2:
                ev("PTY stream %s %r" % (direction, data))
            else:
                ev("PTY stream %s %d bytes" % (direction, ret))
            continue
        if fd in channel_fds:
            ev("unit channel %s packet %r" % (direction, data[:1]), bytes=ret)
            continue
        if fd in not_dbus:
            continue
        key = (fd, direction)
        buf = pending.get(key, b"") + data
        msgs, used = dbus_messages(buf)
        if used is None:
            not_dbus.add(fd)
            pending.pop(key, None)
            continue
        pending[key] = buf[used:]
        for msg in msgs:
            if direction == "out" and msg["type"] == "call":
                calls[msg["serial"]] = msg.get("member")
            label = msg.get("member") or calls.get(msg.get("reply_serial"), "?")
            if msg["type"] in ("reply", "error"):
                label = "%s of %s" % (msg["type"], label)
            elif msg["type"] == "call":
                label = "call %s" % label
            else:
                label = "signal %s" % label
            path = msg.get("path", "")
            ev("D-Bus %s %s" % ("->" if direction == "out" else "<-", label),
               **{k: v for k, v in (("path", path), ("serial", msg.get("serial")),
                                    ("reply_serial", msg.get("reply_serial")),
                                    ("error", msg.get("error"))) if v})
    for s in sessions:
        del s["t0"]
    print(json.dumps({"kind": "start_timeline", "sessions": sessions}))


if __name__ == "__main__":
    main()
