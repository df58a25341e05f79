#!/usr/bin/python3
# vm-tests/faults/soak.py: the root driver of the soak (issue #17). For N
# rounds of about a minute, the application stand-in (faults_app.py, the
# MainPID) runs random sessions from several threads (spawn, write, signal,
# STOP, EOF, close, resize, a stalled reader, bad handshakes), while this
# driver injects one fault per round at a random moment (SIGKILL of the
# supervisor, systemctl daemon-reexec or daemon-reload) and samples the
# supervisor every 2 s. Every round ends with faults.py's invariant check
# (0 units left, 0 "not proven gone", STATUS idle, a new session exits 0,
# descriptors and RSS within the tolerances of the first round's baseline).
#
# A session is lost when it did not end as its kind promises: exactly one
# terminal envelope then EOF, the expected code or signal, and its content
# (echoes, exact byte counts, sizes). Two exceptions, both counted apart: a
# session whose life contains a SIGKILL of the supervisor may end with EOF
# alone or an error of a stable code; one that overlaps a re-exec or reload
# may end with an error of a stable code (systemd away from the bus).
#
# After each round's check (not the warm-up's), a detach/restart/reattach
# (docs/PROTOCOL.md section 10; faults.py's detach case, kinds restart and
# kill9): 2-6 detachable sessions stream a counter, the application is
# restarted or SIGKILLed mid-stream, the next MainPID lists and reattaches
# each at the cursor its predecessor kept, byte for byte to the stream's end
# (`dropped` exactly first - cursor where a ring overflowed), then the
# invariant check again: a failure of either fails the round.
# Usage: soak.py SEED ROUNDS ROUND_SECONDS OUT.json
import json
import os
import random
import shutil
import signal
import sys
import threading
import time

import faults  # same folder (/tests): judge, Campaign.invariant

sys.path.insert(0, "/vm-tests/lib")
import driver  # noqa: E402  (request, resources, run, journal_cursor, ...)

SAMPLE_S = 2.0


def live_sessions():
    """The supervisor's own count, from its STATUS= ("N sessions, M handshakes")."""
    st = driver.status_text()
    try:
        return int(st.split()[0])
    except (ValueError, IndexError):
        return None


def judge_soak(rec, kills, faults_at):
    """(outcome, allowed, excused_by): excused_by names the fault that allowed it."""
    t0, t1 = rec.get("t0", 0), rec.get("t1", 0)
    killed = any(t0 - 0.1 <= k <= t1 + 0.1 for k in kills)
    disturbed = any(a - 0.1 <= t1 and t0 <= b + 2.0 for a, b in faults_at)
    if "exception" in rec:
        return "app_exception", False, None
    if "connect_error" in rec:
        return "connect_error_%d" % rec["connect_error"], False, None
    if rec["kind"] == "bad_handshake":
        return "bad_handshake", True, None
    if rec.get("closed"):
        return "closed_by_client", True, None
    outcome, allowed = faults.judge(rec, killed)
    if outcome == "eof_without_terminal":
        return outcome, allowed, "sigkill" if allowed else None
    if outcome.startswith("error:") and allowed:
        # An error of a stable code is a documented end, but only a fault excuses it here.
        if killed:
            return outcome, True, "sigkill"
        if disturbed:
            return outcome, True, "reexec/reload"
        return outcome, False, None
    if not allowed:
        return outcome, False, None
    term = next(e for e in rec["envelopes"] if e["type"] == "exit")
    exp = rec.get("expect") or {}
    if "code" in exp and (term.get("code") != exp["code"] or term.get("signal") is not None):
        return "exit:%s:%s expected code %s" % (term.get("code"), term.get("signal"), exp["code"]), False, None
    if "signal" in exp and term.get("signal") not in exp["signal"]:
        return "exit:%s:%s expected signal %s" % (term.get("code"), term.get("signal"), exp["signal"]), False, None
    if rec.get("check"):
        return "content: %s" % rec["check"], False, None
    return "as_expected", True, None


def main():
    seed, rounds, round_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    out_path = sys.argv[4]
    rnd = random.Random(seed)
    camp = faults.Campaign(seed, "/dev/null")
    t_start = time.monotonic()
    result = {"seed": seed, "rounds": rounds, "round_seconds": round_s, "warmup_seconds": min(20.0, round_s),
              "tolerances": camp.result["tolerances"], "minutes": [], "failures": []}
    base = camp.baseline()
    result["baseline"] = base
    print("soak: seed %d, %d rounds of %.0f s; baseline fds %s, RssAnon %s kB, VmRSS %s kB" % (
        seed, rounds, round_s, base.get("fds"), base.get("RssAnon"), base.get("VmRSS")), flush=True)
    totals = {"ops": {}, "sessions": 0, "outcomes": {}, "faults": {}, "lost": 0, "excused": {},
              "rounds_failed": 0, "detach_rounds": 0, "detach_sessions": 0, "detach_dropped": 0,
              "detach_failed": 0}
    last_kill = 0.0
    last_app = [0.0]
    # Round 0 warms the supervisor up under the same load without a fault;
    # its idle resources afterwards are the baseline of every later round
    # (an idle supervisor after one session knows nothing of 10 workers).
    for i in range(rounds + 1):
        cursor = driver.journal_cursor()
        workers = rnd.randint(4, 10)
        fault = rnd.choice(["sigkill", "daemon-reexec", "daemon-reload"]) if i else "none"
        this_s = round_s if i else min(20.0, round_s)
        fault_at = rnd.uniform(0.15, 0.8) * this_s
        kills, faults_at, fault_rec = [], [], {"kind": fault, "at_s": round(fault_at, 1)}
        samples = []
        stop = threading.Event()

        def sampler():
            while not stop.is_set():
                pid = driver.supervisor_pid()
                r = driver.resources(pid) if pid > 0 else {"pid": 0}
                r["units"] = len([u for u in driver.leftover_units() if driver.SESSION_UNIT.match(u)])
                r["sessions"] = live_sessions()
                samples.append(r)
                stop.wait(SAMPLE_S)

        def injector():
            nonlocal last_kill
            if fault == "none" or stop.wait(fault_at):
                return
            t0 = time.monotonic()
            if fault == "sigkill":
                # systemd's start limit: at most one kill per 2.5 s (faults.py).
                time.sleep(max(0.0, last_kill + 2.5 - time.monotonic()))
                pid = driver.supervisor_pid()
                if pid > 0:   # never kill(0)
                    try:
                        os.kill(pid, signal.SIGKILL)
                        kills.append(time.monotonic())
                        fault_rec["killed_pid"] = pid
                    except ProcessLookupError:
                        pass
                last_kill = time.monotonic()
            else:
                p = driver.run("systemctl", fault)
                fault_rec["systemctl_rc"] = p.returncode
            faults_at.append((t0, time.monotonic()))
            fault_rec["seconds"] = round(time.monotonic() - t0, 2)

        th = [threading.Thread(target=sampler), threading.Thread(target=injector)]
        for t in th:
            t.start()
        t_round = time.monotonic()
        ans = driver.request({"op": "soak", "seconds": this_s, "workers": workers,
                              "seed": rnd.randrange(1 << 30)}, timeout=int(this_s) + 300)
        stop.set()
        for t in th:
            t.join()
        fails = []
        if "exception" in ans:
            fails.append("app: %s" % ans["exception"])
        if fault == "sigkill" and not kills:
            fails.append("the supervisor was not killed")
        if fault.startswith("daemon-") and fault_rec.get("systemctl_rc") != 0:
            fails.append("systemctl %s exit %s" % (fault, fault_rec.get("systemctl_rc")))
        sessions = ans.get("sessions", [])
        outcomes, lost, excused, kinds = {}, 0, {}, {}
        for rec in sessions:
            outcome, allowed, why = judge_soak(rec, kills, faults_at)
            kinds[rec.get("kind")] = kinds.get(rec.get("kind"), 0) + 1
            key = outcome if allowed else "LOST " + outcome
            outcomes[key] = outcomes.get(key, 0) + 1
            if why:
                excused[why] = excused.get(why, 0) + 1
            if not allowed:
                lost += 1
                if len(result["failures"]) < 50:
                    r = {k: v for k, v in rec.items() if k not in ("envelopes",)}
                    r.update(round=i, outcome=outcome, envelopes=rec.get("envelopes"))
                    result["failures"].append(r)
        if lost:
            fails.append("%d sessions lost: %s" % (lost, sorted(k for k in outcomes if k.startswith("LOST"))))
        inv = camp.invariant(cursor, base, fails)
        if i == 0 and inv["pass"]:
            base = {"after": "warm-up round", **driver.resources(driver.supervisor_pid())}
            result["baseline"] = base
            print("soak: baseline after the warm-up: fds %s, RssAnon %s kB, VmRSS %s kB" % (
                base.get("fds"), base.get("RssAnon"), base.get("VmRSS")), flush=True)
        detach = None
        if i:
            detach = {"kind": rnd.choice(["restart", "kill9"])}
            dfails = []
            tag = "soak-%d-%d" % (seed, i)
            try:
                camp.reattach(detach, dfails, tag, rnd.randint(2, 6), detach["kind"], last_app)
            except Exception as e:  # a bug of the driver fails the round, with its evidence
                dfails.append("driver: %r" % e)
            finally:
                shutil.rmtree(os.path.join(faults.DETACH_DIR, tag), ignore_errors=True)
            dinv = camp.invariant(cursor, base, dfails)
            detach.update(invariant_pass=dinv["pass"], failures=dinv["failures"], fds=dinv.get("fds"),
                          RssAnon=dinv.get("RssAnon"), units_left=dinv.get("units_left"))
            if not dinv["pass"]:
                inv["pass"] = False
                inv["failures"] = inv["failures"] + ["detach: " + f for f in dinv["failures"]]
                inv["units_left"] = (inv.get("units_left") or []) + (dinv.get("units_left") or [])
            inv["not_proven_gone"] = dinv.get("not_proven_gone", inv.get("not_proven_gone"))
            inv.update(fds=dinv.get("fds"), RssAnon=dinv.get("RssAnon"), VmRSS=dinv.get("VmRSS"))
        ok = [s for s in samples if "fds" in s]
        row = {
            "minute": i, "seconds": round(time.monotonic() - t_round, 1), "workers": workers,
            "fault": fault_rec, "sessions": len(sessions), "kinds": kinds, "ops": ans.get("ops", {}),
            "outcomes": outcomes, "lost": lost, "excused": excused,
            "fds": inv.get("fds"), "RssAnon": inv.get("RssAnon"), "VmRSS": inv.get("VmRSS"),
            "pid": inv.get("pid"),
            "peak_fds": max((s["fds"] for s in ok), default=None),
            "peak_RssAnon": max((s.get("RssAnon", 0) for s in ok), default=None),
            "peak_units": max((s["units"] for s in samples), default=None),
            "mean_units": round(sum(s["units"] for s in samples) / max(len(samples), 1), 1),
            "peak_sessions": max((s["sessions"] for s in samples if s["sessions"] is not None), default=None),
            "mean_sessions": round(sum(s["sessions"] or 0 for s in samples) / max(len(samples), 1), 1),
            "units_left": inv.get("units_left"), "not_proven_gone": inv.get("not_proven_gone"),
            "probe": inv.get("probe"), "invariant_pass": inv["pass"], "failures": inv["failures"],
            "detach": detach,
        }
        result["minutes"].append(row)
        for k, v in row["ops"].items():
            totals["ops"][k] = totals["ops"].get(k, 0) + v
        for k, v in outcomes.items():
            totals["outcomes"][k] = totals["outcomes"].get(k, 0) + v
        for k, v in excused.items():
            totals["excused"][k] = totals["excused"].get(k, 0) + v
        if fault != "none":
            totals["faults"][fault] = totals["faults"].get(fault, 0) + 1
        totals["sessions"] += len(sessions)
        totals["lost"] += lost
        totals["rounds_failed"] += 0 if inv["pass"] else 1
        if detach:
            ds = detach.get("sessions", [])
            totals["detach_rounds"] += 1
            totals["detach_sessions"] += len(ds)
            totals["detach_dropped"] += detach.get("dropped", 0)
            totals["detach_failed"] += sum(1 for x in ds if x.get("fail"))
        mins = result["minutes"]
        totals.update(
            ops_done=sum(totals["ops"].values()), faults_injected=sum(totals["faults"].values()),
            units_left=sum(len(m["units_left"] or []) for m in mins),
            not_proven_gone=sum(m["not_proven_gone"] or 0 for m in mins),
            fds_first=mins[0]["fds"], fds_last=row["fds"],
            fds_min=min(m["fds"] for m in mins if m["fds"] is not None),
            fds_max=max(m["fds"] for m in mins if m["fds"] is not None),
            RssAnon_first=mins[0]["RssAnon"], RssAnon_last=row["RssAnon"],
            RssAnon_min=min(m["RssAnon"] for m in mins if m["RssAnon"] is not None),
            RssAnon_max=max(m["RssAnon"] for m in mins if m["RssAnon"] is not None),
            VmRSS_first=mins[0]["VmRSS"], VmRSS_last=row["VmRSS"],
            elapsed_s=round(time.monotonic() - t_start, 1))
        result["totals"] = totals
        with open(out_path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(out_path + ".tmp", out_path)
        print("soak round %d/%d: %s %s; %d sessions (%d workers), %d ops, lost %d, excused %s; %s; fds %s, "
              "RssAnon %s kB, peak units %s, peak sessions %s; invariant %s%s" % (
                  i, rounds, fault, "at %.0f s" % fault_at if i else "(warm-up)", len(sessions), workers,
                  sum(row["ops"].values()), lost, json.dumps(excused, sort_keys=True),
                  "detach/%s/reattach: %d sessions, %d with bytes dropped, %s" % (
                      detach["kind"], len(detach.get("sessions", [])), detach.get("dropped", 0),
                      "pass" if detach["invariant_pass"] else "FAIL") if detach else "no detach round",
                  row["fds"], row["RssAnon"], row["peak_units"], row["peak_sessions"],
                  "pass" if inv["pass"] else "FAIL", "" if inv["pass"] else ": " + "; ".join(inv["failures"])),
              flush=True)
    t = result["totals"]
    print("soak: %d rounds in %.0f s, %d sessions, %d operations, %d faults injected %s, sessions lost %d, "
          "units left %d, not proven gone %d, rounds failed %d; detach/restart/reattach %d rounds, %d sessions "
          "(%d with bytes dropped), %d failed; fds %s -> %s (range %s..%s), "
          "RssAnon %s -> %s kB (range %s..%s)" % (
              rounds, t["elapsed_s"], t["sessions"], t["ops_done"], t["faults_injected"],
              json.dumps(t["faults"], sort_keys=True), t["lost"], t["units_left"], t["not_proven_gone"],
              t["rounds_failed"], t["detach_rounds"], t["detach_sessions"], t["detach_dropped"],
              t["detach_failed"], t["fds_first"], t["fds_last"], t["fds_min"], t["fds_max"],
              t["RssAnon_first"], t["RssAnon_last"], t["RssAnon_min"], t["RssAnon_max"]), flush=True)
    sys.exit(0 if t["lost"] == 0 and t["rounds_failed"] == 0 else 1)


if __name__ == "__main__":
    main()
