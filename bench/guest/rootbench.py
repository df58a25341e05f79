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
    elif mode == "sample":
        cmd_sample(out, sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
