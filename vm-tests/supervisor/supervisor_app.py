#!/usr/bin/python3
# vm-tests/supervisor/supervisor_app.py: the stand-in for the opencode v2
# application in the supervisor's real-systemd suite (supervisor.sh) and the
# argv exposure suite (argv.sh); the protocol code is vm-tests/lib/standin.py.
# As `serve` it runs as opencode-v2.service (User=byk) and performs scenarios on
# request from the root test script over /run/opencode-test/control.sock: it
# connects to the supervisor, opens the approved directory
# O_DIRECTORY|O_CLOEXEC, runs the real helper, then speaks the session
# protocol (docs/PROTOCOL.md) itself. `oneshot` runs one scenario in the
# calling process (used for the refusal cases: another uid, root, a process
# that is not MainPID); `call` sends a request to the server and prints its
# JSON answer.
import array
import json
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, "/vm-tests/lib")
from standin import (EOF, ENV, EVENT, INPUT, OUTPUT, SIGNAL, START, STOP,  # noqa: E402
                     Conn, call, env_payload, frame, serve, spawn_helper)


def run_session(req):
    """One session: connect, helper, then the steps; returns what was seen."""
    res = {"envelopes": [], "output_len": 0, "events": []}
    argv = req.get("argv", ["true"])
    timeout = req.get("timeout", 30)
    deadline = time.monotonic() + timeout
    output = bytearray()
    keep = req.get("keep_output", 1 << 16)
    count_char = req.get("count_char")
    counted = 0
    c = Conn()
    try:
        c.connect()
    except OSError as e:
        res["connect_error"] = e.errno
        return res
    res["connected"] = True
    dirfd = os.open(req.get("cwd", os.path.expanduser("~") or "/"), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if req.get("raw"):
        res["raw"] = raw_start(c, dirfd, req["raw"])
    else:
        env = req.get("env")
        res["helper_status"] = spawn_helper(c.sock, dirfd, argv, req.get("cols", 80), req.get("rows", 24),
                                            env is not None)
        # As the application does: its own ENV frame, once the helper exited 0.
        if env is not None and res["helper_status"] == 0:
            c.send(ENV, env_payload(env))
    os.close(dirfd)

    def take(f):
        nonlocal counted
        ftype, payload = f
        if ftype == OUTPUT:
            res["output_len"] += len(payload)
            if count_char is not None:
                counted += payload.count(count_char.encode())
            if len(output) < keep:
                output.extend(payload[: keep - len(output)])
            if not res["events"] or res["events"][-1] != "output":
                res["events"].append("output")
        elif ftype == EVENT:
            env = json.loads(payload)
            env["_output_before"] = res["output_len"]
            res["envelopes"].append(env)
            res["events"].append(env["type"] + ":" + str(env.get("code", "")))
            if env["type"] in ("exit", "error"):
                res["terminal"] = env
        else:
            res["events"].append("unexpected-type-%d" % ftype)

    def pump_until(pred, until):
        while not pred():
            f = c.read_frame(until)
            if f is None:
                res["eof"] = True
                return False
            take(f)
        return True

    try:
        for step in req.get("steps", []):
            if "terminal" in res:
                break
            if "expect" in step:
                if step["expect"] == "started":
                    ok = pump_until(lambda: any(e["type"] in ("started", "error") for e in res["envelopes"]),
                                    deadline)
                else:
                    want = step["expect"].encode()
                    ok = pump_until(lambda: want in output, deadline)
                if not ok:
                    break
            elif "input" in step:
                c.send(INPUT, step["input"].encode())
            elif "input_bytes" in step:
                c.send(INPUT, bytes.fromhex(step["input_bytes"]))
            elif "signal" in step:
                c.send(SIGNAL, bytes([step["signal"]]))
            elif "stop" in step:
                c.send(STOP)
            elif "eof" in step:
                c.send(EOF)
            elif "raw_frame" in step:
                c.sock.sendall(bytes.fromhex(step["raw_frame"]))
            elif "touch" in step:
                open(step["touch"], "w").close()
            elif "wait_file" in step:
                until = time.monotonic() + step.get("timeout", 60)
                while not os.path.exists(step["wait_file"]) and time.monotonic() < until:
                    time.sleep(0.05)
                res["waited"] = os.path.exists(step["wait_file"])
            elif "sleep" in step:
                time.sleep(step["sleep"])
            elif "close" in step:
                c.sock.close()
                res["closed"] = True
                break
        if not res.get("closed"):
            pump_until(lambda: "terminal" in res, deadline)
            # After the terminal envelope the supervisor closes the connection.
            if "terminal" in res:
                f = c.read_frame(time.monotonic() + 10)
                res["eof_after_terminal"] = f is None
    except TimeoutError as e:
        res["timeout"] = str(e)
    res["output_text"] = output.decode("utf-8", "replace")
    if count_char is not None:
        res["count"] = counted
    return res


def raw_start(c, dirfd, kind):
    """START frames the helper would never send (supervisor-side checks)."""
    payload = struct.pack(">HHII", 80, 24, 0, 1) + struct.pack(">I", 4) + b"true"
    data = frame(START, payload)
    if kind == "no_fd":
        c.sock.sendall(data)
    elif kind == "two_fds":
        fds = array.array("i", [dirfd, dirfd])
        c.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    elif kind == "not_dir":
        f = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        c.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [f]))])
        os.close(f)
    elif kind == "bad_version":
        c.sock.sendmsg([b"\x02" + data[1:]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [dirfd]))])
    elif kind == "nothing":
        pass
    return kind


def handshakes(req):
    """Opens n connections that never send START (they stay in handshake)."""
    n = req.get("n", 17)
    conns, res = [], {"results": []}
    for _ in range(n):
        c = Conn()
        c.connect()
        conns.append(c)
        time.sleep(0.05)  # admission is in accept order
    deadline = time.monotonic() + req.get("timeout", 20)
    for c in conns:
        try:
            f = c.read_frame(deadline)
            res["results"].append(json.loads(f[1])["code"] if f and f[0] == EVENT else None)
        except TimeoutError:
            res["results"].append("timeout")
    return res


def connect_loop(req):
    """A same-uid connect loop (issue #21 point 3): for `seconds`, open `batch`
    connections at once, wait for each one's refusal, close them, again. Sends
    nothing, so every connection holds a handshake slot until refused."""
    end = time.monotonic() + req.get("seconds", 8)
    batch = req.get("batch", 16)
    codes, rounds = {}, 0
    while time.monotonic() < end:
        conns = []
        for _ in range(batch):
            c = Conn()
            try:
                c.connect()
            except OSError as e:
                codes["connect_errno_%d" % e.errno] = codes.get("connect_errno_%d" % e.errno, 0) + 1
                continue
            conns.append(c)
        deadline = time.monotonic() + 10
        for c in conns:
            try:
                f = c.read_frame(deadline)
                code = json.loads(f[1]).get("code", "?") if f and f[0] == EVENT else "eof"
            except TimeoutError:
                code = "timeout"
            codes[code] = codes.get(code, 0) + 1
            c.sock.close()
        rounds += 1
    return {"rounds": rounds, "codes": codes}


def mass(req):
    """`n` sessions running at once (at most `batch` handshakes in flight, so
    the handshake cap is not what refuses), then every connection closed in
    one tight loop: the supervisor must stop and prove all units gone without
    losing systemd or its own bus connection."""
    n, batch = req["n"], req.get("batch", 8)
    argv = req.get("argv", ["sleep", "300"])
    conns, refused = [], []
    t0 = time.monotonic()
    while len(conns) < n and not refused:
        group = []
        for _ in range(min(batch, n - len(conns))):
            c = Conn()
            c.connect()
            dirfd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            status = spawn_helper(c.sock, dirfd, argv, 80, 24)
            os.close(dirfd)
            group.append((c, status))
        for c, status in group:
            env = None
            try:
                f = c.read_frame(time.monotonic() + 60)
                env = json.loads(f[1]) if f and f[0] == EVENT else None
            except TimeoutError:
                pass
            if status != 0 or not env or env.get("type") != "started":
                refused.append({"session": len(conns) + 1, "helper": status, "envelope": env})
            conns.append(c)
    started_s = time.monotonic() - t0
    # What systemd has right before the close (list-units needs no privilege).
    import subprocess
    listed = subprocess.run(["systemctl", "list-units", "--plain", "--no-legend", "--state=active",
                             "opencode-pty-*.service"], capture_output=True, text=True).stdout
    running = sum(1 for line in listed.splitlines()
                  if line.split() and len(line.split()[0]) == len("opencode-pty-") + 32 + len(".service"))
    t1 = time.monotonic()
    for c in conns:
        c.sock.close()
    return {"sessions": len(conns), "refused": refused, "units_running": running,
            "start_s": round(started_s, 2),
            "close_s": round(time.monotonic() - t1, 4)}


def scenario(req):
    op = req.get("op", "session")
    if op == "session":
        return run_session(req)
    if op == "child_session":
        # A child of the MainPID: same uid, same cgroup, not the MainPID.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, json.dumps(run_session(req)).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while True:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
        os.waitpid(pid, 0)
        return json.loads(data)
    if op == "handshakes":
        return handshakes(req)
    if op == "mass":
        return mass(req)
    if op == "connect_loop":
        return connect_loop(req)
    if op == "serial":
        # n sessions one after another from the MainPID.
        return {"sessions": [run_session(req["session"]) for _ in range(req.get("n", 10))]}
    if op == "sessions":
        # Several sessions at once, all from this process (threads): only the
        # MainPID may connect, so they cannot come from children.
        out = [None] * req.get("n", 4)

        def one(i):
            out[i] = run_session(req["session"])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(out))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"sessions": out}
    return {"error": "unknown op " + op}



if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "serve":
        # The mass-close case holds kMaxSessions (1,024) connections at once:
        # the soft limit of a service (1,024) would not even hold them.
        import resource
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        serve(lambda req, link: scenario(req))
    elif mode == "call":
        # "-": the request from stdin, so that a secret in it (argv.sh's
        # environment marker) is in no process's command line.
        call(sys.stdin.read() if sys.argv[2] == "-" else sys.argv[2])
    elif mode == "oneshot":
        print(json.dumps(scenario(json.loads(sys.argv[2]))))
    else:
        sys.exit(2)
