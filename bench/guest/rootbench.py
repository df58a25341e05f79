#!/usr/bin/python3
"""bench/guest/rootbench.py: the root side of the benchmarks, inside the bench
container. Appends one JSON line per measurement to OUT; never judges.

  rootbench.py throughput OUT ROUND FILE VARIANT...
      VARIANT: script-py (bare `script -q -e -f -c "cat FILE" /dev/null`) or
      sdrun-pty (`systemd-run --wait --pty -q -p User=byk cat FILE`); stdin a
      pipe held open, stdout a pipe drained by this process with 1 MiB reads.
  rootbench.py latency OUT ROUND N
      N times each: systemd-run --wait --pty true; systemd-run --wait --pipe
      echo hi; systemd-run --wait --pty echo hi (User=byk); and the seed's
      script chain under systemd-run (sdrun-script: `systemd-run --wait --pty
      script -q -e -f -c "/bin/sh -i -c 'exec CMD'" /dev/null`, the launcher's
      script line with the launcher's own steps left out); connect to first
      stdout byte and to exit.
  rootbench.py interactive OUT ROUND KEYS GAP_MS LEVELS
      for each N of LEVELS (comma list): N `systemd-run --wait --pty -q -p
      User=byk yes` streaming, their stdout pipes drained by this process, and
      one idle `systemd-run --pty ... cat` getting KEYS keystrokes at each pace
      (human: GAP_MS from write to write; fast: the next key on the echo),
      write -> echo read back, as bench-app.js's interactive mode does for the
      stack and node-pty. CPU of this process and of the systemd-run
      processes (the forwarders) around each pace.
  rootbench.py sample OUT LABEL PID [EXTRA-JSON]
      the process's memory (status, smaps_rollup), CPU (stat), descriptors.
"""
import json
import os
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def emit(out, rec):
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")


def run_reader(argv):
    """Runs argv with stdin a pipe held open and stdout a pipe; drains stdout.
    Returns (bytes, first_ms, last_ms, total_ms, status)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd="/")
    fd = p.stdout.fileno()
    n = 0
    first = last = None
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        t = time.monotonic()
        if first is None:
            first = t
        last = t
        n += len(b)
    status = p.wait()
    total = time.monotonic()
    p.stdin.close()
    p.stdout.close()
    ms = lambda t: None if t is None else (t - t0) * 1000.0
    return n, ms(first), ms(last), ms(total), status


def container_cpu():
    """CPU seconds of every process in the container (its cgroup v2 root)."""
    for path in ("/sys/fs/cgroup/unified/cpu.stat", "/sys/fs/cgroup/cpu.stat"):
        try:
            with open(path) as f:
                for line in f:
                    k, v = line.split()
                    if k == "usage_usec":
                        return int(v) / 1e6
        except OSError:
            continue
    return None


def cmd_throughput(out, rnd, path, variants):
    for v in variants:
        if v == "script-py":
            argv = ["/usr/bin/script", "-q", "-e", "-f", "-c", "cat " + path, "/dev/null"]
        elif v == "sdrun-pty":
            argv = ["systemd-run", "--wait", "--pty", "-q", "-p", "User=byk", "cat", path]
        else:
            raise SystemExit("unknown variant " + v)
        c0 = container_cpu()
        n, first, last, total, status = run_reader(argv)
        c1 = container_cpu()
        emit(out, {"kind": "throughput", "round": rnd, "file": path, "variant": v, "bytes": n,
                   "first_ms": first, "last_ms": last, "total_ms": total,
                   "container_cpu_s": None if c0 is None or c1 is None else round(c1 - c0, 3),
                   "exit": {"code": status, "signal": None, "error": None}})
        time.sleep(0.3)


def latency_once(argv):
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd="/")
    fd = p.stdout.fileno()
    first = None
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        if first is None:
            first = (time.monotonic() - t0) * 1000.0
    status = p.wait()
    exit_ms = (time.monotonic() - t0) * 1000.0
    p.stdin.close()
    p.stdout.close()
    return first, exit_ms, status


def cmd_latency(out, rnd, n):
    sd = ["systemd-run", "--wait", "-q", "-p", "User=byk"]
    cases = [("sdrun-pty", sd[:2] + ["--pty"] + sd[2:] + ["true"], "true"),
             ("sdrun-pipe", sd[:2] + ["--pipe"] + sd[2:] + ["echo", "hi"], "echo hi"),
             ("sdrun-pty", sd[:2] + ["--pty"] + sd[2:] + ["echo", "hi"], "echo hi"),
             ("sdrun-pipe", sd[:2] + ["--pipe"] + sd[2:] + ["true"], "true")]
    # The fixed chain systemd-run does not pay: the launcher runs
    # script -q -e -f -c "/bin/sh -i -c 'exec /proc/self/fd/3 --exec'" /dev/null
    # and the command under it. Here the same script line runs under
    # systemd-run with the launcher's steps (its shell step, the monitor)
    # replaced by sh's own -c and an exec of the command.
    for cmd in ("true", "echo hi"):
        line = "/bin/sh -i -c 'exec %s'" % cmd
        cases.append(("sdrun-script", sd[:2] + ["--pty"] + sd[2:] +
                      ["/usr/bin/script", "-q", "-e", "-f", "-c", line, "/dev/null"], cmd))
    for _ in range(n):
        for variant, argv, cmd in cases:
            first, exit_ms, status = latency_once(argv)
            emit(out, {"kind": "latency", "round": rnd, "variant": variant, "cmd": cmd,
                       "first_ms": first, "exit_ms": exit_ms, "ok": status == 0})


def proc_cpu(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except OSError:
        return None


def cmd_interactive(out, rnd, keys, gap_ms, levels):
    import selectors
    sd = ["systemd-run", "--wait", "--pty", "-q", "-p", "User=byk"]
    for n in levels:
        sel = selectors.DefaultSelector()
        procs = []
        tag = "%d-%d-%d" % (os.getpid(), rnd, n)
        load = {"bytes": 0}
        for i in range(n):
            p = subprocess.Popen(sd + ["--unit", "bench-nb-%s-%d" % (tag, i), "yes"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/")
            os.set_blocking(p.stdout.fileno(), False)
            sel.register(p.stdout.fileno(), selectors.EVENT_READ, "nb")
            procs.append(p)
        m = subprocess.Popen(sd + ["--unit", "bench-cat-%s" % tag, "cat"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/")
        os.set_blocking(m.stdout.fileno(), False)
        sel.register(m.stdout.fileno(), selectors.EVENT_READ, "cat")
        st = {"seen": 0, "nl": 0}

        def pump(deadline):
            """Reads whatever is ready until deadline (monotonic s)."""
            while True:
                left = deadline - time.monotonic()
                for key, _ in sel.select(max(0.0, left)):
                    try:
                        b = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not b:  # that systemd-run ended
                        sel.unregister(key.fd)
                        continue
                    if key.data == "nb":
                        load["bytes"] += len(b)
                        continue
                    for c in b:
                        if c == 0x0A and st["nl"] > 0:
                            st["nl"] -= 1
                        elif c == 0x78 and st["nl"] == 0:
                            st["seen"] += 1
                    return True
                if time.monotonic() >= deadline:
                    return False

        def until(pred, secs):
            end = time.monotonic() + secs
            while not pred():
                if time.monotonic() >= end:
                    return False
                pump(end)
            return True

        settle = time.monotonic() + (1.0 if n else 0.5)
        while time.monotonic() < settle:
            pump(settle)
        for pace in ("human", "fast"):
            echo, lost, last = [], 0, -1e9
            b0 = load["bytes"]
            pids = [p.pid for p in procs] + [m.pid]
            fw0 = [proc_cpu(pid) for pid in pids]
            me0 = os.times()
            t0 = time.monotonic()
            for i in range(keys):
                if i and i % 64 == 0:
                    st["nl"] += 2
                    os.write(m.stdin.fileno(), b"\r")
                    if not until(lambda: st["nl"] == 0, 10):
                        st["nl"] = 0
                        lost += 1
                if pace == "human":
                    wait_until = last + gap_ms / 1000.0
                    while time.monotonic() < wait_until:
                        pump(wait_until)
                want = st["seen"] + 1
                k0 = time.monotonic()
                last = k0
                os.write(m.stdin.fileno(), b"x")
                if until(lambda: st["seen"] >= want, 10):
                    echo.append(round((time.monotonic() - k0) * 1000.0, 3))
                else:
                    lost += 1
                    st["seen"] = want
            window = time.monotonic() - t0
            me1 = os.times()
            fw1 = [proc_cpu(pid) for pid in pids]
            fw = sum(b - a for a, b in zip(fw0, fw1) if a is not None and b is not None)
            emit(out, {"kind": "interactive", "round": rnd, "variant": "sdrun-pty", "neighbours": n,
                       "neighbours_running": sum(1 for p in procs if p.poll() is None), "pace": pace,
                       "gap_ms": gap_ms if pace == "human" else 0, "keys": keys, "lost": lost,
                       "window_ms": round(window * 1000.0, 1), "neighbour_bytes": load["bytes"] - b0,
                       "app_user_s": round(me1.user - me0.user, 3), "app_sys_s": round(me1.system - me0.system, 3),
                       "forwarder_cpu_s": round(fw, 3), "echo_ms": echo})
        units = ["bench-nb-%s-%d.service" % (tag, i) for i in range(n)] + ["bench-cat-%s.service" % tag]
        subprocess.run(["systemctl", "stop", "--no-block"] + units, capture_output=True)
        end = time.monotonic() + 30
        for p in procs + [m]:
            while p.poll() is None and time.monotonic() < end:
                pump(min(end, time.monotonic() + 0.05))
            if p.poll() is None:
                p.kill()
                p.wait()
        sel.close()
        for p in procs + [m]:
            p.stdin.close()
            p.stdout.close()
        time.sleep(1.0 if n else 0.2)


def read_kv(path, keys=None):
    d = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                v = v.strip().split()
                if v and v[0].isdigit() and (keys is None or k in keys):
                    d[k] = int(v[0])
    except OSError as e:
        d["error"] = str(e)
    return d


def cmd_sample(out, label, pid, extra):
    rec = {"kind": "sample", "label": label, "pid": pid, "t": time.time()}
    rec["status"] = read_kv("/proc/%d/status" % pid,
                            {"VmRSS", "VmHWM", "VmSize", "RssAnon", "RssFile", "RssShmem", "Threads"})
    rec["smaps_rollup"] = read_kv("/proc/%d/smaps_rollup" % pid,
                                  {"Rss", "Pss", "Pss_Anon", "Pss_File", "Private_Dirty", "Anonymous"})
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        rec["cpu_s"] = (int(fields[11]) + int(fields[12])) / CLK_TCK
        rec["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    except OSError as e:
        rec["error"] = str(e)
    if extra:
        rec.update(json.loads(extra))
    emit(out, rec)
    print(json.dumps(rec))


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "throughput":
        cmd_throughput(out, int(sys.argv[3]), sys.argv[4], sys.argv[5:])
    elif mode == "latency":
        cmd_latency(out, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "interactive":
        cmd_interactive(out, int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]),
                        [int(x) for x in sys.argv[6].split(",")])
    elif mode == "sample":
        cmd_sample(out, sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
