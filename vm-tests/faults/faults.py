#!/usr/bin/python3
# vm-tests/faults/faults.py: the root driver of the fault campaign (issue #17,
# first slice). It asks the application stand-in (faults_app.py, the MainPID)
# for sessions over /run/opencode-test/control.sock, injects the faults itself
# (SIGKILL of the supervisor, systemctl daemon-reexec / daemon-reload, root
# connections), and after every repetition runs the same invariant check:
#   - 0 opencode-pty-* units left (list-units --all, any load state), bounded wait;
#   - 0 "not proven gone" lines from the supervisor since the case began;
#   - STATUS= says "0 sessions, 0 handshakes";
#   - a new session works (exit 0, its output seen);
#   - the supervisor's descriptor count within FD_TOL of the case's baseline,
#     RssAnon within RSS_ANON_TOL_KB and VmRSS within RSS_TOL_KB above it;
#   - every session the fault touched got exactly one terminal envelope (exit,
#     or error with a code of docs/PROTOCOL.md section 8) and then EOF; a plain
#     EOF without one only when the supervisor was SIGKILLed (counted apart);
#     a deadline passing (a hang) always fails.
# The detachable sessions (docs/PROTOCOL.md section 10) have two cases of
# their own: `detach` (the application restarted or SIGKILLed mid-stream and
# every session reattached by the next MainPID with byte-exact continuity; a
# grace period ending while detached; the supervisor ended while its sessions
# are detached) and `rings` (every ring of kMaxScrollbackTotalBytes full while
# detached: the supervisor's RssAnon bound).
# Usage: faults.py SEED OUT.json [kills=N] [reexecs=N] [reloads=N] [sessions=M] [churn=N]
#                  [restarts=N] [restart_sessions=M] [memory=N] [memory_others=K]
#                  [stall_sessions=N] [stall_seconds=S] [stall_bytes=B]
#                  [detach=N] [detach_sessions=M] [rings=N] [only=CASE,...]
import json
import os
import random
import re
import shutil
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, "/vm-tests/lib")
from driver import (APP, CONTROL, FD_TOL, RSS_ANON_TOL_KB, RSS_TOL_KB, SESSION_UNIT,  # noqa: E402
                    SLICE, SUP, SUPERVISOR_SOCK, app_pid, journal_cursor, leftover_units, request,
                    resources, run, status_text, sup_journal, supervisor_pid, unit_gone, wait_until)
from faults_app import COUNTER_LINE, DETACH_DIR  # noqa: E402  (same folder)

APP_DROPIN = "/run/systemd/system/opencode-v2.service.d/faults-restart.conf"
# kSessionMemoryCap of common/limits.h: kOutputQueueBytes 4 x (8 + 65,536) +
# kInputQueueBytes 4 x 16,384 + kEnvelopeQueueBytes 4 x (8 + 4,096) + a frame
# header 8 + kMaxFramePayload (= kMaxStartPayload, 12 + 4 x 1,024 + 65,536 + 8) + a
# START held while its ENV frame arrives (kMaxStartPayload again) = 483,440 bytes.
# The stall case bounds the supervisor's RssAnon by baseline + N x this + RSS_ANON_TOL_KB.
SESSION_MEMORY_CAP = 483440
# kMaxScrollbackTotalBytes of common/limits.h: every detachable session's ring
# together (64 MiB), reserved whole at START. The rings case bounds RssAnon by
# baseline + this + N x kSessionMemoryCap + RSS_ANON_TOL_KB.
MAX_SCROLLBACK_TOTAL = 64 << 20
# The detach case's kinds, cycled in a seeded order like the SIGKILL phases.
DETACH_KINDS = ("restart", "kill9", "grace", "supervisor")
# The rings case's shapes: sessions x ring = MAX_SCROLLBACK_TOTAL, and the
# refusal of one more detachable START (a 64 KiB ring) that each must get:
# 32 x 2 MiB leaves no scrollback; 64 x 1 MiB is kMaxDetachableSessions,
# which is checked first.
RING_SHAPES = ((32, 2 << 20, "scrollback_exhausted"), (64, 1 << 20, "too_many_detachable"))
# Stable error codes a supervisor may send (docs/PROTOCOL.md section 8).
STABLE_CODES = {
    "bad_version", "unknown_type", "bad_reserved", "frame_too_large", "frame_too_small", "bad_start",
    "bad_argc", "arg_too_long", "argv_too_long", "empty_command", "bad_size", "no_descriptor",
    "extra_descriptor", "truncated_control", "bad_control", "not_directory", "bad_utf8", "bad_signal",
    "protocol_state", "start_timeout", "unauthenticated", "root_refused", "too_many_sessions",
    "too_many_handshakes", "kernel_unsupported", "unit_start_failed", "unit_property_mismatch",
    "launch_failed", "stop_failed", "input_overflow", "internal", "bad_detach", "too_many_detachable",
    "scrollback_exhausted", "bad_attach", "no_such_session", "session_attached", "bad_cursor"}
# SIGKILL phases and the window (ms after the app's mark) the kill falls in.
KILL_WINDOWS = {"handshake": (0, 200), "start": (0, 40), "streaming": (0, 1000),
                "stopping": (0, 4000), "cleanup": (250, 400)}


def started_detachable(ans, want, fails):
    """The app's records of detachable sessions that started (those with a
    session id); when fewer than `want` did, says so in `fails` with how the
    others ended."""
    recs = ans.get("sessions", [])
    ok = [r for r in recs if "session" in r]
    if len(ok) != want:
        fails.append("%d of %d detachable sessions started: %s" % (
            len(ok), want, sorted({judge(r.get("start", {}), False)[0] for r in recs if "session" not in r})))
    return ok


def judge(rec, killed):
    """The outcome of one session the fault touched, and whether it is allowed."""
    if "connect_error" in rec:
        return "connect_error_%d" % rec["connect_error"], False
    if rec.get("timeout"):
        return "hang", False
    if rec.get("terminals", 0) > 1:
        return "several_terminals", False
    if rec.get("terminals") == 1:
        t = next(e for e in rec["envelopes"] if e["type"] in ("exit", "error"))
        if not rec.get("eof"):
            return "terminal_without_eof", False
        if t["type"] == "error":
            return "error:%s" % t.get("code"), t.get("code") in STABLE_CODES
        return "exit:%s" % (t.get("code") if t.get("code") is not None else t.get("signal")), True
    if rec.get("eof"):
        return "eof_without_terminal", killed
    return "no_outcome", False


class Campaign:
    def __init__(self, seed, out_path):
        self.rnd = random.Random(seed)
        self.seed = seed
        self.out_path = out_path
        self.result = {"seed": seed, "tolerances": {"fds": FD_TOL, "RssAnon_kB": RSS_ANON_TOL_KB,
                                                    "VmRSS_kB": RSS_TOL_KB}, "cases": {}}
        self.ok = True

    def baseline(self):
        """Resources of an idle supervisor after one session (lazy allocations made)."""
        p = request({"op": "probe"})
        wait_until(10, lambda: status_text() == "0 sessions, 0 handshakes")
        return {"probe": judge(p, False)[0], **resources(supervisor_pid())}

    def invariant(self, case_cursor, base, extra_fail=()):
        inv = {"failures": list(extra_fail)}
        t0 = time.monotonic()
        gone = wait_until(40, lambda: not leftover_units())
        left = [] if gone else leftover_units()
        inv["units_left"] = left
        inv["units_gone_s"] = round(time.monotonic() - t0, 2)
        if left:
            inv["failures"].append("units left: %s" % " ".join(left))
        p = request({"op": "probe"})
        outcome, _ = judge(p, False)
        inv["probe"] = outcome
        if outcome != "exit:0" or not p.get("saw_output"):
            inv["failures"].append("new session: %s" % outcome)
        st = wait_until(10, lambda: status_text() == "0 sessions, 0 handshakes") and status_text()
        inv["status"] = st or status_text()
        if not st:
            inv["failures"].append("STATUS=%r" % inv["status"])
        j = sup_journal(case_cursor)
        unproven = [m for m, _ in j if "not proven gone" in m]
        inv["not_proven_gone"] = len(unproven)
        if unproven:
            inv["failures"].append("not proven gone: %s" % unproven[:3])
        r = resources(supervisor_pid())
        inv.update(fds=r.get("fds"), VmRSS=r.get("VmRSS"), RssAnon=r.get("RssAnon"), pid=r["pid"])
        if r.get("fds") is None or abs(r["fds"] - base["fds"]) > FD_TOL:
            inv["failures"].append("fds %s, baseline %s" % (r.get("fds"), base["fds"]))
        if r.get("RssAnon") is None or r["RssAnon"] - base["RssAnon"] > RSS_ANON_TOL_KB:
            inv["failures"].append("RssAnon %s kB, baseline %s kB" % (r.get("RssAnon"), base["RssAnon"]))
        if r.get("VmRSS") is None or r["VmRSS"] - base["VmRSS"] > RSS_TOL_KB:
            inv["failures"].append("VmRSS %s kB, baseline %s kB" % (r.get("VmRSS"), base["VmRSS"]))
        inv["pass"] = not inv["failures"]
        return inv

    def record(self, name, case):
        reps = case["repetitions"]
        case["passed"] = sum(1 for r in reps if r["invariant"]["pass"])
        case["failed"] = len(reps) - case["passed"]
        self.result["cases"][name] = case
        if case["failed"]:
            self.ok = False
        with open(self.out_path, "w") as f:
            json.dump(self.result, f, indent=1)
        fds = [r["invariant"]["fds"] for r in reps if r["invariant"]["fds"] is not None]
        anon = [r["invariant"]["RssAnon"] for r in reps if r["invariant"]["RssAnon"] is not None]
        print("faults %s: %d/%d repetitions passed; %s; fds baseline %s, after each %s..%s; "
              "RssAnon baseline %s kB, after each %s..%s kB; %.0f s" % (
                  name, case["passed"], len(reps), case["summary"], case["baseline"]["fds"],
                  min(fds, default="-"), max(fds, default="-"), case["baseline"].get("RssAnon"),
                  min(anon, default="-"), max(anon, default="-"), case["seconds"]), flush=True)
        for i, r in enumerate(reps):
            if not r["invariant"]["pass"]:
                print("  repetition %d FAILED: %s" % (i + 1, "; ".join(r["invariant"]["failures"])), flush=True)

    # --- case 1 ---------------------------------------------------------------------------------------
    def sigkill(self, n):
        t_case = time.monotonic()
        cursor = journal_cursor()
        base = self.baseline()
        reps, outcomes = [], {}
        phases = []
        while len(phases) < n:
            cycle = list(KILL_WINDOWS)
            self.rnd.shuffle(cycle)
            phases += cycle
        last_kill = 0.0
        for phase in phases[:n]:
            # systemd's default start limit (5 starts in 10 s) would leave the
            # socket failed (service-start-limit-hit): at most one kill per 2.5 s.
            time.sleep(max(0.0, last_kill + 2.5 - time.monotonic()))
            lo, hi = KILL_WINDOWS[phase]
            delay_ms = round(self.rnd.uniform(lo, hi), 1)
            pid = supervisor_pid()
            rep = {"phase": phase, "delay_ms": delay_ms, "killed_pid": pid}
            rep_cursor = journal_cursor()

            def on_mark(what, rep=rep):
                time.sleep(delay_ms / 1000)
                rep["killed"] = False
                if pid > 0:   # never kill(0): that is the driver's own process group
                    try:
                        os.kill(pid, signal.SIGKILL)
                        rep["killed"] = True
                    except ProcessLookupError:
                        pass
                rep["units_at_kill"] = leftover_units()
                nonlocal last_kill
                last_kill = time.monotonic()

            rec = request({"op": "kill", "phase": phase, "timeout": 60}, on_mark)
            fails = []
            if "exception" in rec:
                fails.append("app: %s" % rec["exception"])
            if not rep.get("killed"):
                fails.append("the supervisor was not killed (no mark, or already gone)")
            outcome, allowed = judge(rec, killed=True)
            rep["outcome"] = outcome
            rep["session"] = rec
            if not allowed:
                fails.append("session outcome %s" % outcome)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            inv = self.invariant(cursor, base, fails)
            # The killed instance's units: each one proven gone by the new
            # instance's start-up recovery (journal), or already collected by
            # systemd (the unit ended inactive while no supervisor ran, so the
            # new instance never saw it); GetUnit must say NoSuchUnit for every
            # one either way.
            j = sup_journal(rep_cursor)
            proven = {u for m, u in j if m in ("leftover PTY unit proven gone", "PTY unit proven gone")}
            at_kill = rep.get("units_at_kill", [])
            rep["leftovers_proven_gone"] = sorted(set(at_kill) & proven)
            rep["leftovers_collected_by_systemd"] = sorted(set(at_kill) - proven)
            still = [u for u in at_kill if not unit_gone(u)]
            if still:
                inv["failures"].append("GetUnit still finds %s" % " ".join(still))
                inv["pass"] = False
            rep["restarted_pid"] = inv["pid"]
            rep["invariant"] = inv
            reps.append(rep)
        eof_only = outcomes.get("eof_without_terminal", 0)
        proven = sum(len(r.get("leftovers_proven_gone", [])) for r in reps)
        collected = sum(len(r.get("leftovers_collected_by_systemd", [])) for r in reps)
        phases_hit = {}
        for r in reps:
            phases_hit[r["phase"]] = phases_hit.get(r["phase"], 0) + 1
        self.record("sigkill", {"count": n, "baseline": base, "repetitions": reps, "outcomes": outcomes,
                                "eof_without_terminal_after_kill": eof_only, "phases": phases_hit,
                                "summary": "phases %s, outcomes %s (EOF without a terminal envelope after the "
                                           "kill: %d), units left at the kill: %d proven gone by the new "
                                           "instance, %d collected by systemd before it" % (
                                               json.dumps(phases_hit, sort_keys=True),
                                               json.dumps(outcomes, sort_keys=True), eof_only, proven, collected),
                                "seconds": round(time.monotonic() - t_case, 1)})

    # --- case 2 ---------------------------------------------------------------------------------------
    def systemd_op(self, verb, n, m):
        t_case = time.monotonic()
        cursor = journal_cursor()
        base = self.baseline()
        reps, outcomes = [], {}
        for _ in range(n):
            before = self.rnd.uniform(0.0, 1.0)
            after = self.rnd.uniform(0.0, 0.5)
            pid = supervisor_pid()
            rep_cursor = journal_cursor()
            rep = {"before_s": round(before, 3), "after_s": round(after, 3)}

            def on_mark(what, rep=rep):
                rep["units_live"] = len([u for u in leftover_units() if SESSION_UNIT.match(u)])
                time.sleep(before)
                t0 = time.monotonic()
                p = run("systemctl", verb)
                rep["systemctl_rc"] = p.returncode
                rep["systemctl_s"] = round(time.monotonic() - t0, 2)
                time.sleep(after)

            ans = request({"op": "live", "m": m, "timeout": 120}, on_mark)
            fails = []
            if "exception" in ans:
                fails.append("app: %s" % ans["exception"])
            if rep.get("systemctl_rc") != 0:
                fails.append("systemctl %s exit %s" % (verb, rep.get("systemctl_rc")))
            if rep.get("units_live") != m:
                fails.append("%s of %s units live at the fault" % (rep.get("units_live"), m))
            sess = ans.get("sessions", [])
            rep_out = {}
            for rec in sess:
                outcome, allowed = judge(rec, killed=False)
                if outcome == "exit:0" and not rec.get("rounds_after_stop"):
                    outcome, allowed = "exit_without_echo_after_fault", False
                rep_out[outcome] = rep_out.get(outcome, 0) + 1
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                if not allowed:
                    fails.append("session outcome %s" % outcome)
            if len(sess) != m:
                fails.append("%d sessions reported, %d asked" % (len(sess), m))
            rep["outcomes"] = rep_out
            rep["max_rtt_ms"] = max((r.get("max_rtt_ms", 0) for r in sess), default=None)
            rep["sessions"] = sess
            if supervisor_pid() != pid:
                fails.append("the supervisor changed pid %d -> %d" % (pid, supervisor_pid()))
            # A re-exec drops systemd's direct connections: the supervisor must have reconnected.
            rep["reconnected_lines"] = sum(1 for msg, _ in sup_journal(rep_cursor)
                                           if msg.startswith("reconnected to systemd"))
            if verb == "daemon-reexec" and rep["reconnected_lines"] < 1:
                fails.append("no 'reconnected to systemd' from the supervisor after the re-exec")
            rep["invariant"] = self.invariant(cursor, base, fails)
            reps.append(rep)
        name = verb.replace("daemon-", "")
        self.record(name, {"count": n, "sessions": m, "baseline": base, "repetitions": reps,
                           "outcomes": outcomes,
                           "summary": "%d x %d sessions, outcomes %s, max echo round trip %s ms" % (
                               n, m, json.dumps(outcomes, sort_keys=True),
                               max((r["max_rtt_ms"] or 0 for r in reps), default=None)),
                           "seconds": round(time.monotonic() - t_case, 1)})

    # --- case 3 ---------------------------------------------------------------------------------------
    def churn(self, total):
        t_case = time.monotonic()
        cursor = journal_cursor()
        base = self.baseline()
        rounds = 4 if total <= 4000 else 10
        per = total // rounds
        reps = []
        for _ in range(rounds):
            pid = supervisor_pid()
            n_root = per // 5
            rep = {"app_cycles": per - n_root, "root_cycles": n_root, "samples": []}
            stop = threading.Event()
            root_codes = {}

            def root_churn(seed=self.rnd.randrange(1 << 30)):
                rr = random.Random(seed)
                for _ in range(n_root):
                    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    try:
                        c.connect(SUPERVISOR_SOCK)
                        if rr.random() < 0.5:
                            c.settimeout(10)
                            data = b""
                            while True:
                                chunk = c.recv(4096)
                                if not chunk:
                                    break
                                data += chunk
                            m = re.search(rb'"code":"([a-z_]+)"', data)
                            k = m.group(1).decode() if m else "eof"
                        else:
                            k = "closed_at_once"
                    except OSError as e:
                        k = type(e).__name__
                    finally:
                        c.close()
                    root_codes[k] = root_codes.get(k, 0) + 1

            t_round = time.monotonic()

            def sampler():
                while not stop.is_set():
                    rep["samples"].append({"t": round(time.monotonic() - t_round, 2), **resources(pid)})
                    stop.wait(0.05)

            th = [threading.Thread(target=root_churn), threading.Thread(target=sampler)]
            for t in th:
                t.start()
            t0 = time.monotonic()
            ans = request({"op": "churn", "n": per - n_root, "seed": self.rnd.randrange(1 << 30)})
            th[0].join()
            rep["seconds"] = round(time.monotonic() - t0, 2)
            stop.set()
            th[1].join()
            fails = []
            if "exception" in ans:
                fails.append("app: %s" % ans["exception"])
            rep["app"] = {k: ans.get(k) for k in ("kinds", "codes")}
            rep["root_codes"] = root_codes
            good = ans.get("good", [])
            rep["good_sessions"] = [judge(g, False)[0] for g in good]
            bad_good = [o for o in rep["good_sessions"] if o != "exit:0"]
            if bad_good:
                fails.append("sessions during the churn: %s" % bad_good)
            if supervisor_pid() != pid:
                fails.append("the supervisor changed pid %d -> %d" % (pid, supervisor_pid()))
            peak = [s for s in rep["samples"] if "fds" in s]
            rep["peak_fds"] = max((s["fds"] for s in peak), default=None)
            rep["peak_RssAnon"] = max((s["RssAnon"] for s in peak), default=None)
            rep["invariant"] = self.invariant(cursor, base, fails)
            reps.append(rep)
        self.record("churn", {"count": total, "rounds": rounds, "baseline": base, "repetitions": reps,
                              "summary": "%d cycles in %d rounds (%.0f cycles/s), peak fds %s, peak RssAnon %s kB" % (
                                  total, rounds, total / max(sum(r["seconds"] for r in reps), 0.001),
                                  max(r["peak_fds"] or 0 for r in reps), max(r["peak_RssAnon"] or 0 for r in reps)),
                              "seconds": round(time.monotonic() - t_case, 1)})

    # --- case 4 ---------------------------------------------------------------------------------------
    def restart(self, n, m):
        """systemctl restart opencode-v2.service with M sessions open: half of
        them and one authenticated connection without START are held by the
        heir, a child of the old MainPID that outlives it (KillMode=process
        for this case). Afterwards the heir tries START on the held
        connection, on a running session's connection and on a fresh one."""
        t_case = time.monotonic()
        os.makedirs(os.path.dirname(APP_DROPIN), exist_ok=True)
        with open(APP_DROPIN, "w") as f:
            f.write("# faults.py restart case: the old MainPID's child outlives it\n[Service]\nKillMode=process\n")
        run("systemctl", "daemon-reload")
        cursor = journal_cursor()
        base = self.baseline()
        reps, outcomes = [], {}
        last = [0.0]
        try:
            for _ in range(n):
                delay = round(self.rnd.uniform(0.0, 0.5), 3)
                rep = {"delay_s": delay}

                def on_mark(what, rep=rep):
                    rep["heir_pid"] = int(what.split()[1])
                    rep["old_main_pid"] = app_pid()
                    # systemd's start limit (5 starts in 10 s) applies to the
                    # application's unit too: the first --long run hit it at
                    # the sixth restart 1.5 s apart. At most one per 3 s.
                    time.sleep(max(0.0, last[0] + 3.0 - time.monotonic()) + delay)
                    last[0] = time.monotonic()
                    rep["restart_rc"] = run("systemctl", "restart", APP).returncode
                    wait_until(30, lambda: app_pid() not in (0, rep["old_main_pid"]) and os.path.exists(CONTROL))
                    rep["new_main_pid"] = app_pid()

                ans = request({"op": "restart_prep", "m": m}, on_mark, timeout=120)
                fails = []
                if "exception" in ans:
                    fails.append("app: %s" % ans["exception"])
                if rep.get("restart_rc") != 0:
                    fails.append("systemctl restart exit %s" % rep.get("restart_rc"))
                if rep.get("new_main_pid") in (None, 0, rep.get("old_main_pid")):
                    fails.append("MainPID did not change (%s -> %s)" % (rep.get("old_main_pid"), rep.get("new_main_pid")))
                if not ans.get("parent_exited"):
                    fails.append("the heir did not see the old MainPID exit")
                if not all(ans.get("running_before", [False])):
                    fails.append("not every session ran before the restart: %s" % ans.get("running_before"))

                def ended(rec, what, codes=None, started_before=False):
                    envs = rec.get("envelopes", [])
                    starts = sum(1 for e in envs if e["type"] == "started")
                    if starts != (1 if started_before else 0):
                        fails.append("%s: %d started envelopes (the heir started something)" % (what, starts))
                    if rec.get("timeout"):
                        fails.append("%s: no end (hang)" % what)
                    if rec.get("terminals") != 1 or not rec.get("eof"):
                        fails.append("%s: %s terminal envelopes, eof %s" % (what, rec.get("terminals"), rec.get("eof")))
                        return "no_terminal"
                    t = next(e for e in envs if e["type"] in ("exit", "error"))
                    o = "%s:%s" % (t["type"], t.get("code") if t.get("code") is not None else t.get("signal"))
                    if t["type"] == "error" and (t.get("code") not in STABLE_CODES or (codes and t.get("code") not in codes)):
                        fails.append("%s: %s" % (what, o))
                    outcomes["%s %s" % (what, o)] = outcomes.get("%s %s" % (what, o), 0) + 1
                    return o

                rep["pending"] = ended(ans.get("pending", {}), "held connection without START")
                rep["fresh"] = ended(ans.get("fresh", {}), "heir's own connection", codes={"unauthenticated"})
                rep["held"] = [ended(h, "held running session", started_before=True) for h in ans.get("held", [])]
                if len(rep["held"]) != (m + 1) // 2:
                    fails.append("%d held sessions reported, %d expected" % (len(rep["held"]), (m + 1) // 2))
                rep["helper_status"] = {k: ans.get(k) for k in ("pending_helper_status", "fresh_helper_status",
                                                                 "held_helper_status")}
                hp = rep.get("heir_pid", 0)
                if hp > 0 and not wait_until(10, lambda: not os.path.exists("/proc/%d" % hp)):
                    fails.append("the heir %d did not exit" % hp)
                rep["invariant"] = self.invariant(cursor, base, fails)
                reps.append(rep)
        finally:
            os.unlink(APP_DROPIN)
            run("systemctl", "daemon-reload")
        self.record("restart", {"count": n, "sessions": m, "baseline": base, "repetitions": reps,
                                "outcomes": outcomes,
                                "summary": "%d restarts with %d sessions (%d held by the heir), outcomes %s" % (
                                    n, m, (m + 1) // 2, json.dumps(outcomes, sort_keys=True)),
                                "seconds": round(time.monotonic() - t_case, 1)})

    # --- case 5 ---------------------------------------------------------------------------------------
    def memory(self, n, k, limit):
        """A temporary MemoryMax=LIMIT on opencode-pty.slice (systemctl
        set-property --runtime; the product sets no memory limit itself and
        refuses drop-ins on a PTY unit): a command allocating past it is
        killed by the kernel's OOM killer while K other sessions run."""
        t_case = time.monotonic()
        cursor = journal_cursor()
        base = self.baseline()
        reps, outcomes = [], {}
        p = run("systemctl", "set-property", "--runtime", SLICE, "MemoryMax=%s" % limit)
        try:
            for _ in range(n):
                rep_cursor = journal_cursor()
                rep = {"limit": limit, "set_property_rc": p.returncode,
                       "slice_MemoryMax": run("systemctl", "show", "-P", "MemoryMax", SLICE).stdout.strip()}
                ans = request({"op": "memory", "k": k}, timeout=240)
                fails = []
                if "exception" in ans:
                    fails.append("app: %s" % ans["exception"])
                if p.returncode != 0:
                    fails.append("systemctl set-property exit %d: %s" % (p.returncode, p.stderr.strip()))
                hog = ans.get("hog", {})
                term = next((e for e in hog.get("envelopes", []) if e["type"] in ("exit", "error")), None)
                rep["hog_terminal"] = term
                rep["hog_tail"] = hog.get("tail", "")[-80:]
                outcome, allowed = judge(hog, False)
                key = "hog %s exact=%s result=%s" % (outcome, (term or {}).get("exact"), (term or {}).get("result"))
                outcomes[key] = outcomes.get(key, 0) + 1
                # Faithful: the kernel's SIGKILL, never an exit code (least of all 0 or success).
                if not allowed or not term or term["type"] != "exit" or term.get("signal") != "KILL" \
                        or term.get("code") is not None or term.get("result") != "oom-kill":
                    fails.append("memory hog ended as %s (%s), want exit signal KILL, result oom-kill; output "
                                 "tail %r" % (outcome, term, rep["hog_tail"]))
                # What the kernel and systemd said about it.
                j = run("journalctl", "--no-pager", "--after-cursor", rep_cursor, "-o", "cat").stdout
                rep["oom_lines"] = [l for l in j.splitlines() if "oom" in l.lower() or "memory" in l.lower()][:6]
                others = ans.get("others", [])
                rep["others"] = []
                for o in others:
                    oo, ok = judge(o, False)
                    rep["others"].append(oo)
                    if not (ok and oo == "exit:0" and o.get("echo_before") and o.get("echo_after")):
                        fails.append("another session was touched: %s, echo before %s, after %s" % (
                            oo, o.get("echo_before"), o.get("echo_after")))
                if len(others) != k:
                    fails.append("%d other sessions reported, %d asked" % (len(others), k))
                rep["invariant"] = self.invariant(cursor, base, fails)
                reps.append(rep)
        finally:
            run("systemctl", "set-property", "--runtime", SLICE, "MemoryMax=infinity")
        self.record("memory", {"count": n, "others": k, "limit": limit, "baseline": base, "repetitions": reps,
                               "outcomes": outcomes,
                               "summary": "%d x a command past MemoryMax=%s on %s with %d other sessions, outcomes %s" % (
                                   n, limit, SLICE, k, json.dumps(outcomes, sort_keys=True)),
                               "seconds": round(time.monotonic() - t_case, 1)})

    # --- case 6 ---------------------------------------------------------------------------------------
    def stall(self, n, seconds, nbytes):
        """N streaming sessions whose reader stops for SECONDS: the supervisor's
        memory stays within N x kSessionMemoryCap above its baseline, and every
        byte arrives afterwards."""
        t_case = time.monotonic()
        cursor = journal_cursor()
        base = self.baseline()
        pid = supervisor_pid()
        rep = {"sessions": n, "stall_s": seconds, "bytes_per_session": nbytes, "samples": []}

        def on_mark(what):
            rep["units_live"] = len([u for u in leftover_units() if SESSION_UNIT.match(u)])
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                rep["samples"].append({"t": round(time.monotonic() - t0, 2), **resources(pid)})
                time.sleep(0.25)

        ans = request({"op": "stall", "n": n, "bytes": nbytes, "timeout": seconds + 240}, on_mark,
                      timeout=seconds + 300)
        fails = []
        if "exception" in ans:
            fails.append("app: %s" % ans["exception"])
        if rep.get("units_live") != n:
            fails.append("%s of %d units live during the stall" % (rep.get("units_live"), n))
        anon = [s["RssAnon"] for s in rep["samples"] if "RssAnon" in s]
        rep["peak_RssAnon"] = max(anon, default=None)
        rep["bound_kB"] = base["RssAnon"] + (n * SESSION_MEMORY_CAP) // 1024 + RSS_ANON_TOL_KB
        if rep["peak_RssAnon"] is None or rep["peak_RssAnon"] > rep["bound_kB"]:
            fails.append("RssAnon %s kB during the stall, bound %d kB (baseline + %d x kSessionMemoryCap + %d kB)" % (
                rep["peak_RssAnon"], rep["bound_kB"], n, RSS_ANON_TOL_KB))
        sess = ans.get("sessions", [])
        outcomes, lost = {}, 0
        for rec in sess:
            o, ok = judge(rec, False)
            if ok and o == "exit:0" and (rec["output_len"] != rec["expected"] or rec["ys"] != rec["expected_ys"]):
                o, ok = "bytes %d of %d, y %d of %d" % (rec["output_len"], rec["expected"], rec["ys"],
                                                        rec["expected_ys"]), False
            if ok and o == "exit:0" and rec.get("before_stall", 0) >= rec["expected"]:
                o, ok = "all output before the stall (nothing stalled)", False
            outcomes[o] = outcomes.get(o, 0) + 1
            if not ok or o != "exit:0":
                lost += 1
                fails.append("session: %s" % o)
        if len(sess) != n:
            fails.append("%d sessions reported, %d asked" % (len(sess), n))
        rep["outcomes"] = outcomes
        rep["bytes_total"] = sum(r.get("output_len", 0) for r in sess)
        rep["before_stall_min"] = min((r.get("before_stall", 0) for r in sess), default=None)
        rep["invariant"] = self.invariant(cursor, base, fails)
        self.record("stall", {"count": 1, "sessions": n, "baseline": base, "repetitions": [rep],
                              "summary": "%d sessions x %d bytes, readers stalled %d s: outcomes %s, %d bytes "
                                         "counted, peak RssAnon %s kB (bound %d kB)" % (
                                             n, nbytes, seconds, json.dumps(outcomes, sort_keys=True),
                                             rep["bytes_total"], rep["peak_RssAnon"], rep["bound_kB"]),
                              "seconds": round(time.monotonic() - t_case, 1)})

    # --- case 7 ---------------------------------------------------------------------------------------
    def restart_app(self, rep, how, last):
        """The next MainPID: `systemctl restart`, or SIGKILL of the MainPID then
        `systemctl restart` (the unit failed). At most one per 3 s: systemd's
        start limit (the restart case). Waits for the new control socket."""
        time.sleep(max(0.0, last[0] + 3.0 - time.monotonic()))
        last[0] = time.monotonic()
        old = rep["old_main_pid"] = app_pid()
        if how == "kill9" and old > 0:   # never kill(0)
            os.kill(old, signal.SIGKILL)
            rep["killed_state"] = wait_until(30, lambda: run("systemctl", "show", "-P", "ActiveState", APP)
                                             .stdout.strip() in ("failed", "inactive") and
                                             run("systemctl", "show", "-P", "ActiveState", APP).stdout.strip())
        rep["restart_rc"] = run("systemctl", "restart", APP).returncode

        def serving():
            if app_pid() in (0, old):
                return False
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                c.connect(CONTROL)   # bound and listening: one empty request, answered or dropped
                return True
            except OSError:
                return False
            finally:
                c.close()
        wait_until(30, serving)
        rep["new_main_pid"] = app_pid()
        if rep["restart_rc"] != 0:
            return "systemctl restart exit %s" % rep["restart_rc"]
        if rep["new_main_pid"] in (0, old):
            return "MainPID did not change (%s -> %s)" % (old, rep["new_main_pid"])
        return None

    def reattach(self, rep, fails, tag, m, how, last):
        """M detachable sessions run the counter; the MainPID is restarted or
        SIGKILLed a random 0-1 s after each delivered its first byte; the next
        MainPID lists them and attaches each at the cursor its predecessor
        kept: those with a 1 MiB ring at once (mid-stream), those with a
        64 KiB ring once their command ended while detached (ring overflowed)."""
        lines = 40000
        rings = [1 << 20, 65536]   # the whole stream (360,000 bytes) fits the first; not the second
        ans = request({"op": "detach_prep", "tag": tag, "m": m, "lines": lines, "grace": 60, "rings": rings},
                      timeout=180)
        if "exception" in ans:
            fails.append("app before: %s" % ans["exception"])
        ok = started_detachable(ans, m, fails)
        if not all(ans.get("streaming", [False])):
            fails.append("not every session streamed before the fault: %s" % ans.get("streaming"))
        rep["units"] = [x["unit"] for x in ok]
        rep["delay_s"] = round(self.rnd.uniform(0.0, 1.0), 3)
        time.sleep(rep["delay_s"])
        rep["units_at_fault"] = len([u for u in leftover_units() if SESSION_UNIT.match(u)])
        err = self.restart_app(rep, how, last)
        if err:
            fails.append(err)
        # The stream's second half: written while detached, whatever the timing.
        os.makedirs(os.path.join(DETACH_DIR, tag), exist_ok=True)
        with open(os.path.join(DETACH_DIR, tag, "go"), "w"):
            pass
        rep["attach_after_s"] = round(self.rnd.uniform(0.0, 0.5), 3)
        time.sleep(rep["attach_after_s"])
        res = request({"op": "detach_resume", "tag": tag, "sessions": ok, "timeout": 120}, timeout=180)
        if "exception" in res:
            fails.append("app after: %s" % res["exception"])
        listed = res.get("listed") or {}
        if listed.get("type") != "listed" or listed.get("count") != len(res.get("list", [])):
            fails.append("LIST ended with %s after %d entries" % (listed, len(res.get("list", []))))
        others = sorted({e.get("session") for e in res.get("list", [])} - {x["session"] for x in ok})
        if others:
            fails.append("LIST shows sessions not started here: %s" % others)
        rep["sessions"] = []
        total = lines * COUNTER_LINE
        for r in res.get("sessions", []):
            why = []
            att, lst, c = r.get("attached"), r.get("listed"), r.get("cursor_kept")
            if r.get("note_before"):
                why.append("before the restart: %s" % r["note_before"])
            if c is None:
                why.append("no cursor kept (%s)" % r.get("cursor_error"))
            if not lst or lst.get("state") != "detached" or lst.get("scrollback") != r.get("ring"):
                why.append("listed as %s" % lst)
            if not att:
                why.append("not attached: %s" % judge(r, False)[0])
            else:
                d = att.get("dropped")
                if att.get("session") != r["session"] or not isinstance(d, int) or d < 0 or \
                        att.get("cursor") != (c or 0) + d:
                    why.append("attached %s for the kept cursor %s (want cursor = kept + dropped)" % (att, c))
                elif d > 0 and (r["ring"] >= total or (lst and att["cursor"] < lst.get("first", 0))):
                    why.append("dropped %d: the ring holds the whole stream, or the cursor %d is before the "
                               "listed first %s" % (d, att["cursor"], (lst or {}).get("first")))
                ex = r.get("listed_exited")
                if r["ring"] < total:
                    # Ended while detached: first and next are final, so the
                    # bytes asked for that are gone are exactly first - cursor.
                    if not ex or not ex.get("exited") or ex.get("code") != 0 or ex.get("next") != total:
                        why.append("not listed as exited (code 0, next %d) before the attach: %s" % (total, ex))
                    elif d != ex["first"] - (c or 0) or d <= 0 or att.get("next") != total:
                        why.append("attached %s for the kept cursor %s after the exit while detached, listed first "
                                   "%s: want dropped = first - cursor > 0" % (att, c, ex["first"]))
                if not isinstance(att.get("next"), int) or att["next"] - att.get("cursor", 0) > r["ring"] or \
                        (lst and att["next"] < lst.get("next", 0)):
                    why.append("attached next %s for the ring %d, listed next %s" % (
                        att.get("next"), r["ring"], (lst or {}).get("next")))
            if r.get("bad"):
                why.append(r["bad"])
            if r.get("end") != total:
                why.append("the stream ends at %s of %d bytes" % (r.get("end"), total))
            o, allowed = judge(r, False)
            if o != "exit:0" or not allowed:
                why.append("ended %s" % o)
            rep["sessions"].append({"session": r.get("session"), "ring": r.get("ring"), "cursor_kept": c,
                                    "attached": att, "listed": lst, "listed_exited": r.get("listed_exited"),
                                    "bytes": r.get("bytes"), "end": r.get("end"),
                                    "outcome": o, "fail": why})
            fails.extend("session %s: %s" % ((r.get("session") or "?")[:8], w) for w in why)
        if len(res.get("sessions", [])) != len(ok):
            fails.append("%d sessions reattached, %d started" % (len(res.get("sessions", [])), len(ok)))
        rep["mid_stream"] = sum(1 for x in rep["sessions"] if (x["cursor_kept"] or 0) < lines // 2 * COUNTER_LINE)
        rep["dropped"] = sum(1 for x in rep["sessions"] if (x["attached"] or {}).get("dropped"))

    def grace_ends(self, rep, fails, tag, rep_cursor):
        """Three detachable sessions (grace 3 s) never attached again: each unit
        proven gone, the journal line for each, and an ATTACH afterwards is
        no_such_session."""
        ans = request({"op": "detach_grace", "tag": tag, "grace": 3, "timeout": 90}, timeout=150)
        if "exception" in ans:
            fails.append("app: %s" % ans["exception"])
        ok = started_detachable(ans, 3, fails)
        if ans.get("still_listed"):
            fails.append("still listed at the hang guard: %s" % ans["still_listed"])
        for r in ok:
            a = r.get("attach", {})
            o = judge(a, False)[0]
            if o != "error:no_such_session":
                fails.append("ATTACH to %s (%s) after its grace: %s" % (r["session"][:8], r["kind"], o))
        units = {r["unit"]: r for r in ok}
        still = [u for u in units if not wait_until(30, lambda u=u: unit_gone(u))]
        if still:
            fails.append("GetUnit still finds %s" % " ".join(still))
        lines = {u for m_, u in sup_journal(rep_cursor)
                 if m_.startswith("detached session not attached within its grace period")}
        missing = sorted("%s (%s)" % (u, r["kind"]) for u, r in units.items() if u not in lines)
        if missing:
            fails.append("no grace-period journal line for %s" % ", ".join(missing))
        rep["sessions"] = [{k: r.get(k) for k in ("kind", "session", "unit", "seen_detached", "listed_exited")}
                           for r in ans.get("sessions", [])]
        rep["grace_lines"] = len(lines & set(units))
        rep["gone_after_polls"] = ans.get("gone_after_polls")

    def supervisor_ends(self, rep, fails, m, last_sup):
        """M detachable sessions detached, then the supervisor SIGKILLed or
        restarted (systemctl restart): every session ends with it (LIST is
        empty, ATTACH no_such_session) and every unit is proven gone."""
        ans = request({"op": "detach_hold", "m": m, "grace": 60, "timeout": 60}, timeout=120)
        if "exception" in ans:
            fails.append("app: %s" % ans["exception"])
        ok = started_detachable(ans, m, fails)
        if not all(r.get("seen_detached") for r in ok):
            fails.append("not every session listed detached: %s" % [r.get("seen_detached") for r in ok])
        rep["how"] = self.rnd.choice(["sigkill", "restart"])
        time.sleep(max(0.0, last_sup[0] + 2.5 - time.monotonic()))
        rep_cursor = journal_cursor()
        pid = rep["killed_pid"] = supervisor_pid()
        rep["units_at_fault"] = leftover_units()
        if rep["how"] == "sigkill":
            if pid > 0:   # never kill(0)
                os.kill(pid, signal.SIGKILL)
        else:
            rc = run("systemctl", "restart", SUP).returncode
            if rc != 0:
                fails.append("systemctl restart %s exit %d" % (SUP, rc))
        last_sup[0] = time.monotonic()
        res = request({"op": "detach_gone", "ids": [r["session"] for r in ok], "timeout": 60}, timeout=120)
        if "exception" in res:
            fails.append("app after: %s" % res["exception"])
        listed = res.get("listed") or {}
        if listed.get("type") != "listed" or set(res.get("list", [])) & {r["session"] for r in ok}:
            fails.append("LIST after the supervisor's end: %s, %s" % (listed, res.get("list")))
        for sid, a in res.get("attach", {}).items():
            o = judge(a, False)[0]
            if o != "error:no_such_session":
                fails.append("ATTACH to %s after the supervisor's end: %s" % (sid[:8], o))
        still = [u for u in rep["units_at_fault"] if not wait_until(30, lambda u=u: unit_gone(u))]
        if still:
            fails.append("GetUnit still finds %s" % " ".join(still))
        if supervisor_pid() == pid:
            fails.append("the supervisor kept its pid %d" % pid)
        j = sup_journal(rep_cursor)
        proven = {u for m_, u in j if m_ in ("leftover PTY unit proven gone", "PTY unit proven gone")}
        rep["units_proven_gone"] = len(proven & set(rep["units_at_fault"]))
        rep["units_collected_by_systemd"] = len(set(rep["units_at_fault"]) - proven)

    def detach(self, n, m):
        """Detachable sessions (docs/PROTOCOL.md section 10) through four
        faults, cycled in a seeded order: the application restarted
        (`systemctl restart`) or SIGKILLed mid-stream and every session
        reattached by the next MainPID with byte-exact continuity; a grace
        period ending while detached; the supervisor ended while its
        sessions are detached."""
        t_case = time.monotonic()
        cursor = journal_cursor()
        base = self.baseline()
        kinds = []
        while len(kinds) < n:
            cycle = list(DETACH_KINDS)
            self.rnd.shuffle(cycle)
            kinds += cycle
        reps, last_app, last_sup = [], [0.0], [0.0]
        for k, kind in enumerate(kinds[:n]):
            tag = "%d-%d" % (self.seed, k)
            rep = {"kind": kind}
            fails = []
            rep_cursor = journal_cursor()
            try:
                if kind in ("restart", "kill9"):
                    self.reattach(rep, fails, tag, m, kind, last_app)
                elif kind == "grace":
                    self.grace_ends(rep, fails, tag, rep_cursor)
                else:
                    self.supervisor_ends(rep, fails, m, last_sup)
            finally:
                shutil.rmtree(os.path.join(DETACH_DIR, tag), ignore_errors=True)
            rep["invariant"] = self.invariant(cursor, base, fails)
            reps.append(rep)
        by_kind = {}
        for r in reps:
            by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
        re_ = [x for r in reps for x in r.get("sessions", []) if "cursor_kept" in x]
        self.record("detach", {
            "count": n, "sessions": m, "baseline": base, "repetitions": reps, "kinds": by_kind,
            "summary": "kinds %s; %d sessions reattached after an application restart or SIGKILL (%d with "
                       "their kept cursor mid-stream, %d with bytes dropped, %d bytes replayed and streamed "
                       "after the cursors), %d grace periods ended (%d journal lines), %d supervisor ends "
                       "(%d units proven gone by it, %d collected by systemd)" % (
                           json.dumps(by_kind, sort_keys=True), len(re_),
                           sum(r.get("mid_stream", 0) for r in reps), sum(r.get("dropped", 0) for r in reps),
                           sum(x.get("bytes") or 0 for x in re_), by_kind.get("grace", 0),
                           sum(r.get("grace_lines", 0) for r in reps), by_kind.get("supervisor", 0),
                           sum(r.get("units_proven_gone", 0) for r in reps),
                           sum(r.get("units_collected_by_systemd", 0) for r in reps)),
            "seconds": round(time.monotonic() - t_case, 1)})

    # --- case 8 ---------------------------------------------------------------------------------------
    def rings(self, n):
        """Every ring full while detached: the shapes of RING_SHAPES in turn
        (N sessions x RING = kMaxScrollbackTotalBytes). One more detachable
        START is refused with the shape's code; each command writes 1.5 x RING
        while detached; the supervisor's RssAnon, sampled every 0.25 s, stays
        within baseline + kMaxScrollbackTotalBytes + N x kSessionMemoryCap +
        RSS_ANON_TOL_KB; each session attached at cursor 0 replays exactly its
        stream's last RING bytes (dropped = first), then is STOPped."""
        t_case = time.monotonic()
        cursor = journal_cursor()
        base = self.baseline()
        pid = supervisor_pid()
        reps = []
        for k in range(n):
            count, ring, code = RING_SHAPES[k % len(RING_SHAPES)]
            tag = "rings-%d-%d" % (self.seed, k)
            rep = {"sessions": count, "ring": ring, "refusal_wanted": code, "samples": []}
            stop = threading.Event()
            t0 = time.monotonic()

            def sample(rep=rep, stop=stop):
                while not stop.is_set():
                    rep["samples"].append({"t": round(time.monotonic() - t0, 2), **resources(pid)})
                    stop.wait(0.25)
            sampler = threading.Thread(target=sample)

            def on_mark(what, rep=rep):
                if what == "detached":
                    rep["units_detached"] = len([u for u in leftover_units() if SESSION_UNIT.match(u)])
                    sampler.start()
                else:   # full: a second of samples with every ring full
                    rep["units_full"] = len([u for u in leftover_units() if SESSION_UNIT.match(u)])
                    rep["full_from"] = len(rep["samples"])
                    time.sleep(1.0)

            try:
                ans = request({"op": "rings", "tag": tag, "n": count, "ring": ring, "grace": 300,
                               "extra_ring": 65536, "timeout": 300}, on_mark, timeout=420)
            finally:
                stop.set()
                if sampler.is_alive():
                    sampler.join()
                shutil.rmtree(os.path.join(DETACH_DIR, tag), ignore_errors=True)
            fails = []
            if "exception" in ans:
                fails.append("app: %s" % ans["exception"])
            ok = started_detachable(ans, count, fails)
            rep["refusal"] = judge(ans.get("extra", {}), False)[0]
            if rep["refusal"] != "error:" + code:
                fails.append("one more detachable START: %s, want error %s" % (rep["refusal"], code))
            for key, what in (("detached", "listed detached"), ("full", "listed with a full ring")):
                rep[key] = ans.get(key)
                if ans.get(key) != count:
                    fails.append("%s of %d sessions %s" % (ans.get(key), count, what))
            for key in ("units_detached", "units_full"):
                if rep.get(key) != count:
                    fails.append("%s: %s PTY units, want %d" % (key, rep.get(key), count))
            total = ring + ring // 2
            outcomes = {}
            for r in ok:
                att = r.get("attached") or {}
                o = judge(r, False)[0]
                outcomes[o] = outcomes.get(o, 0) + 1
                if att.get("cursor") != total - ring or att.get("dropped") != total - ring or \
                        att.get("next") != total:
                    fails.append("session %s attached %s, want cursor = dropped = %d, next %d" % (
                        r["session"][:8], att, total - ring, total))
                if r.get("bad") or r.get("end") != total:
                    fails.append("session %s replay: %s, ends at %s of %d" % (r["session"][:8], r.get("bad"),
                                                                             r.get("end"), total))
                term = next((e for e in r.get("envelopes", []) if e["type"] in ("exit", "error")), {})
                if o.startswith("error") or term.get("signal") not in ("TERM", "HUP"):
                    fails.append("session %s after STOP: %s" % (r["session"][:8], o))
            rep["outcomes"] = outcomes
            anon = [x["RssAnon"] for x in rep["samples"] if "RssAnon" in x]
            full = [x["RssAnon"] for x in rep["samples"][rep.get("full_from", len(anon)):] if "RssAnon" in x]
            rep["peak_RssAnon"] = max(anon, default=None)
            rep["full_RssAnon"] = max(full, default=None)
            rep["bound_kB"] = base["RssAnon"] + (MAX_SCROLLBACK_TOTAL + count * SESSION_MEMORY_CAP) // 1024 + \
                RSS_ANON_TOL_KB
            if rep["peak_RssAnon"] is None or rep["peak_RssAnon"] > rep["bound_kB"]:
                fails.append("RssAnon %s kB with every ring full, bound %d kB (baseline + kMaxScrollbackTotalBytes "
                             "+ %d x kSessionMemoryCap + %d kB)" % (rep["peak_RssAnon"], rep["bound_kB"], count,
                                                                   RSS_ANON_TOL_KB))
            rep["list_full"] = ans.get("list_full")
            rep["after_replay"] = sorted({r.get("after_replay", "") for r in ok})[:3]
            rep["invariant"] = self.invariant(cursor, base, fails)
            reps.append(rep)
        self.record("rings", {
            "count": n, "baseline": base, "repetitions": reps,
            "summary": "; ".join("%d x %d KiB rings full while detached: peak RssAnon %s kB (%s kB above the "
                                 "baseline; bound %d kB), the %dth START %s" % (
                                     r["sessions"], r["ring"] >> 10, r["peak_RssAnon"],
                                     (r["peak_RssAnon"] or 0) - base["RssAnon"], r["bound_kB"],
                                     r["sessions"] + 1, r["refusal"]) for r in reps),
            "seconds": round(time.monotonic() - t_case, 1)})


CASES = ("sigkill", "reexec", "reload", "churn", "restart", "memory", "stall", "detach", "rings")


def main():
    seed, out = int(sys.argv[1]), sys.argv[2]
    counts = {"kills": 20, "reexecs": 5, "reloads": 5, "sessions": 10, "churn": 2000, "restarts": 3,
              "restart_sessions": 4, "memory": 2, "memory_others": 3,
              "stall_sessions": 10, "stall_seconds": 5, "stall_bytes": 4 << 20,
              "detach": 8, "detach_sessions": 4, "rings": 2}
    only = set(CASES)
    for a in sys.argv[3:]:
        k, _, v = a.partition("=")
        if k == "only":
            only = set(v.split(","))
            if only - set(CASES):
                sys.exit("faults.py: unknown case(s) %s; the cases are %s" % (",".join(only - set(CASES)), ",".join(CASES)))
        elif k in counts:
            counts[k] = int(v)
        else:
            sys.exit("faults.py: unknown argument %r" % a)
    c = Campaign(seed, out)
    c.result["counts"] = counts
    c.result["cases_run"] = [x for x in CASES if x in only]
    print("faults: seed %d; cases %s; counts %s" % (seed, ",".join(c.result["cases_run"]),
                                                    json.dumps(counts, sort_keys=True)), flush=True)
    if "sigkill" in only:
        c.sigkill(counts["kills"])
    if "reexec" in only:
        c.systemd_op("daemon-reexec", counts["reexecs"], counts["sessions"])
    if "reload" in only:
        c.systemd_op("daemon-reload", counts["reloads"], counts["sessions"])
    if "churn" in only:
        c.churn(counts["churn"])
    if "restart" in only:
        c.restart(counts["restarts"], counts["restart_sessions"])
    if "memory" in only:
        c.memory(counts["memory"], counts["memory_others"], "64M")
    if "stall" in only:
        c.stall(counts["stall_sessions"], counts["stall_seconds"], counts["stall_bytes"])
    if "detach" in only:
        c.detach(counts["detach"], counts["detach_sessions"])
    if "rings" in only:
        c.rings(counts["rings"])
    sys.exit(0 if c.ok else 1)


if __name__ == "__main__":
    main()
