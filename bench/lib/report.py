#!/usr/bin/python3
"""bench/lib/report.py: turns one bench run's raw records into the report:
a JSON summary (host, environment, summary, where the raw records are; small,
committed in bench/results), a PNG chart and a Markdown table (printed; with
--readme also written into bench/README.md between the bench:results markers).
The raw records stay in the run's output folder (/var/tmp/opencode-bench-*:
records.jsonl, env.json, host.json), never in git; --raw-json also writes the
summary with every record there. --from-summary re-renders the table and the
chart (and --readme) from a committed summary alone; without --png it draws
nothing and does not load matplotlib. The chart needs matplotlib
(bench/lib/chart.py, imported from this script's own folder, which Python puts
first on the import path); everything else is the standard library.

Every figure is either a ratio against a baseline from the same run (medians
over the repeats) or a per-session / per-MiB cost. Nothing is judged here.
"""
import argparse
import hashlib
import json
import os
import re
import statistics
import sys

MIB = 1 << 20


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def pct(xs, p):
    """Nearest-rank percentile."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = max(1, -(-len(xs) * p // 100))
    return xs[int(k) - 1]


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def r3(x, n=3):
    return None if x is None else round(x, n)


# ------------------------------------------------------------------ summary ----

def throughput_summary(recs, env):
    size_mib = env.get("size_mib")
    rows = [r for r in recs if r.get("kind") == "throughput" and not r.get("profile") and r.get("round", 0) >= 0]
    if not rows:
        return None
    # Lines of 100 bytes; ONLCR adds one \r per newline (the file's last
    # partial line has none).
    expected = size_mib * MIB + size_mib * MIB // 100 if size_mib else None
    out = {"file_mib": size_mib, "expected_bytes": expected, "variants": {}}
    per_round = {}
    for r in rows:
        v = r["variant"]
        d = out["variants"].setdefault(v, {"runs": 0, "complete": 0, "errors": [], "total_ms": [],
                                           "transfer_ms": [], "sup_cpu_s": [], "client_cpu_s": [],
                                           "sup_user_s": [], "sup_sys_s": [], "sup_wakeups": [],
                                           "container_cpu_s": [], "sup_minflt": []})
        d["runs"] += 1
        ok = r.get("bytes") == expected and r.get("first_ms") is not None and (r.get("exit") or {}).get("error") is None
        # node-pty reports the exit and closes the master before the last
        # output was read; the lost tail is recorded, and the run counts
        # when less than 64 KiB is missing.
        lost = expected - r["bytes"] if expected and r.get("bytes") is not None else None
        if not ok and v == "nodepty" and lost is not None and 0 < lost < 65536 and r.get("first_ms") is not None:
            d.setdefault("lost_tail_bytes", []).append(lost)
            ok = True
        if not ok:
            d["errors"].append({"round": r.get("round"), "bytes": r.get("bytes"), "exit": r.get("exit")})
            continue
        d["complete"] += 1
        transfer = r["last_ms"] - r["first_ms"]
        d["total_ms"].append(r["total_ms"])
        d["transfer_ms"].append(transfer)
        if r.get("sup_cpu_s") is not None:
            d["sup_cpu_s"].append(r["sup_cpu_s"])
        if r.get("client_cpu_s") is not None:
            d["client_cpu_s"].append(r["client_cpu_s"])
        for k in ("sup_user_s", "sup_sys_s", "sup_wakeups", "container_cpu_s", "sup_minflt"):
            if r.get(k) is not None:
                d[k].append(r[k])
        per_round.setdefault(r["round"], {})[v] = (r["total_ms"], transfer)
    for v, d in out["variants"].items():
        d["median_total_ms"] = r3(med(d["total_ms"]), 1)
        d["median_transfer_ms"] = r3(med(d["transfer_ms"]), 1)
        d["mib_per_s"] = r3(size_mib / (d["median_transfer_ms"] / 1000), 1) if d["median_transfer_ms"] else None
        d["sup_cpu_ms_per_mib"] = r3(med(d["sup_cpu_s"]) * 1000 / size_mib, 2) if d["sup_cpu_s"] else None
        d["client_cpu_ms_per_mib"] = r3(med(d["client_cpu_s"]) * 1000 / size_mib, 2) if d["client_cpu_s"] else None
        if d["sup_user_s"]:
            d["sup_user_ms_per_mib"] = r3(med(d["sup_user_s"]) * 1000 / size_mib, 2)
            d["sup_sys_ms_per_mib"] = r3(med(d["sup_sys_s"]) * 1000 / size_mib, 2)
        if d["container_cpu_s"]:
            d["container_cpu_ms_per_mib"] = r3(med(d["container_cpu_s"]) * 1000 / size_mib, 2)
        if d["sup_wakeups"]:
            d["sup_wakeups_per_mib"] = r3(med(d["sup_wakeups"]) / size_mib, 1)
        if d["sup_minflt"]:
            d["sup_minor_faults_per_mib"] = r3(med(d["sup_minflt"]) / size_mib, 1)

    def cmp(base, other):
        b, o = out["variants"].get(base), out["variants"].get(other)
        if not b or not o:
            return None
        paired = [ratio(x[base][1], x[other][1]) for x in per_round.values() if base in x and other in x]
        paired_total = [ratio(x[base][0], x[other][0]) for x in per_round.values() if base in x and other in x]
        cpu = ratio(b.get("container_cpu_ms_per_mib"), o.get("container_cpu_ms_per_mib"))
        return {"baseline": base, "variant": other, "ratio_cpu_cost": r3(cpu),
                "ratio_transfer": r3(ratio(b["median_transfer_ms"], o["median_transfer_ms"])),
                "ratio_total": r3(ratio(b["median_total_ms"], o["median_total_ms"])),
                "ratio_transfer_paired_median": r3(med(paired)),
                "ratio_total_paired_median": r3(med(paired_total)),
                "pairs": len(paired)}
    out["ratios"] = [x for x in (cmp("script", "stack"), cmp("script-py", "stack"), cmp("script", "nodepty"),
                                 cmp("script-py", "sdrun-pty"), cmp("script-py", "script")) if x]
    return out


def latency_summary(recs):
    rows = [r for r in recs if r.get("kind") == "latency" and r.get("round", 0) >= 0]
    if not rows:
        return None
    groups = {}
    for r in rows:
        groups.setdefault((r["variant"], r["cmd"]), []).append(r)
    out = {"cases": {}}
    for (v, cmd), rs in sorted(groups.items()):
        good = [r for r in rs if r.get("ok")]
        out["cases"]["%s: %s" % (v, cmd)] = {
            "variant": v, "cmd": cmd, "n": len(rs), "ok": len(good),
            "first_p50_ms": r3(pct([r["first_ms"] for r in good], 50), 1),
            "first_p99_ms": r3(pct([r["first_ms"] for r in good], 99), 1),
            "exit_p50_ms": r3(pct([r["exit_ms"] for r in good], 50), 1),
            "exit_p99_ms": r3(pct([r["exit_ms"] for r in good], 99), 1),
            "started_p50_ms": r3(pct([r.get("started_ms") for r in good], 50), 1),
            "connect_p50_ms": r3(pct([r.get("connect_ms") for r in good], 50), 1),
            "helper_exit_p50_ms": r3(pct([r.get("helper_exit_ms") for r in good], 50), 1),
            "errors": sorted({r.get("error") for r in rs if r.get("error")}),
        }
    c = out["cases"]
    bd = [r for r in recs if r.get("kind") == "latency_breakdown"]
    if bd:
        out["supervisor_breakdown"] = bd[0]
    tl = [r for r in recs if r.get("kind") == "start_timeline"]
    if tl:
        # One traced session of `true` (the first accepted connection): the
        # events up to the exit envelope, D-Bus signals about other units
        # left out (they are the same with or without this session).
        out["timeline"] = {"sessions_traced": len(tl[0]["sessions"]), "events": []}
        if tl[0]["sessions"]:
            for e in tl[0]["sessions"][0]["events"]:
                if e["what"].startswith("D-Bus <- signal") and "opencode_2dpty" not in e.get("path", "") \
                        and not e["what"].endswith(("JobRemoved", "JobNew")):
                    continue
                out["timeline"]["events"].append({k: e[k] for k in ("ms", "what", "path", "envelope") if k in e})
                if e.get("envelope") == "exit":
                    break
    # How much of the stack's excess over systemd-run is the seed's script
    # chain: systemd-run running the same script line (sdrun-script) minus
    # systemd-run running the command directly (sdrun-pty).
    chain = {}
    for cmd, key in (("true", "exit"), ("echo hi", "first")):
        st, sd, sc = (c.get("%s: %s" % (v, cmd)) for v in ("stack", "sdrun-pty", "sdrun-script"))
        if st and sd and sc and None not in (st[key + "_p50_ms"], sd[key + "_p50_ms"], sc[key + "_p50_ms"]):
            excess = st[key + "_p50_ms"] - sd[key + "_p50_ms"]
            cost = sc[key + "_p50_ms"] - sd[key + "_p50_ms"]
            chain[cmd] = {"measure": key, "stack_p50_ms": st[key + "_p50_ms"], "sdrun_p50_ms": sd[key + "_p50_ms"],
                          "sdrun_script_p50_ms": sc[key + "_p50_ms"], "excess_ms": r3(excess, 2),
                          "chain_ms": r3(cost, 2), "chain_share": r3(cost / excess) if excess > 0 else None,
                          "rest_ms": r3(excess - cost, 2)}
    if chain:
        out["script_chain"] = chain

    def rr(base, base_key, other, other_key):
        b, o = c.get(base), c.get(other)
        if not b or not o:
            return None
        return {"baseline": "%s %s" % (base, base_key), "variant": "%s %s" % (other, other_key),
                "ratio_p50": r3(ratio(b[base_key + "_p50_ms"], o[other_key + "_p50_ms"])),
                "ratio_p99": r3(ratio(b[base_key + "_p99_ms"], o[other_key + "_p99_ms"]))}
    out["ratios"] = [x for x in (
        rr("sdrun-pty: true", "exit", "stack: true", "exit"),
        rr("sdrun-pty: echo hi", "first", "stack: echo hi", "first"),
        rr("sdrun-pipe: echo hi", "first", "stack: echo hi", "first"),
        rr("sdrun-pty: echo hi", "exit", "stack: echo hi", "exit"),
        rr("sdrun-script: true", "exit", "stack: true", "exit"),
        rr("sdrun-script: echo hi", "first", "stack: echo hi", "first")) if x]
    return out


def interactive_summary(recs):
    """Keystroke echo (write of one byte -> its echo read back) per variant,
    neighbour count and pace, pooled over rounds; the neighbours' throughput
    and the CPU per MiB they cost; `true` spawn -> exit under the same load."""
    rows = [r for r in recs if r.get("kind") == "interactive" and r.get("echo_ms") is not None]
    if not rows:
        return None
    cases = {}
    for r in rows:
        d = cases.setdefault("%s|%d|%s" % (r["variant"], r["neighbours"], r["pace"]), {
            "variant": r["variant"], "neighbours": r["neighbours"], "pace": r["pace"], "gap_ms": r.get("gap_ms"),
            "echo": [], "lost": 0, "neighbours_running": [], "bytes": 0, "window_ms": 0.0,
            "sup_s": 0.0, "sup_known": False, "app_s": 0.0, "fw_s": 0.0, "fw_known": False})
        d["echo"] += r["echo_ms"]
        d["lost"] += r.get("lost", 0)
        d["neighbours_running"].append(r.get("neighbours_running"))
        for who, ms in (r.get("run_queue_wait_ms") or {}).items():
            d.setdefault("wait", {}).setdefault(who, 0.0)
            d["wait"][who] += ms
        d["bytes"] += r.get("neighbour_bytes", 0)
        d["window_ms"] += r.get("window_ms", 0)
        d["app_s"] += (r.get("app_user_s") or 0) + (r.get("app_sys_s") or 0)
        if r.get("sup_user_s") is not None:
            d["sup_s"] += r["sup_user_s"] + r["sup_sys_s"]
            d["sup_known"] = True
        if r.get("forwarder_cpu_s") is not None:
            d["fw_s"] += r["forwarder_cpu_s"]
            d["fw_known"] = True
    out = {"cases": {}}
    order = lambda d: (d["variant"], d["neighbours"], ["human", "fast"].index(d["pace"]) if d["pace"] in ("human", "fast") else 2)
    for k, d in sorted(cases.items(), key=lambda x: order(x[1])):
        mib = d["bytes"] / MIB
        out["cases"][k] = {
            "variant": d["variant"], "neighbours": d["neighbours"], "pace": d["pace"], "gap_ms": d["gap_ms"],
            "keys": len(d["echo"]), "lost": d["lost"], "neighbours_running": min(x for x in d["neighbours_running"] if x is not None)
            if any(x is not None for x in d["neighbours_running"]) else None,
            "echo_p50_ms": r3(pct(d["echo"], 50), 2), "echo_p99_ms": r3(pct(d["echo"], 99), 2),
            "echo_max_ms": r3(max(d["echo"]), 2) if d["echo"] else None,
            "neighbour_mib_per_s": r3(mib / (d["window_ms"] / 1000), 1) if d["window_ms"] and d["neighbours"] else None,
            "sup_cpu_ms_per_mib": r3(d["sup_s"] * 1000 / mib, 2) if d["sup_known"] and mib >= 1 else None,
            "app_cpu_ms_per_mib": r3(d["app_s"] * 1000 / mib, 2) if mib >= 1 else None,
            "forwarder_cpu_ms_per_mib": r3(d["fw_s"] * 1000 / mib, 2) if d["fw_known"] and mib >= 1 else None,
            "sup_cpu_pct": r3(d["sup_s"] * 100000 / d["window_ms"], 1) if d["sup_known"] and d["window_ms"] else None,
            # run-queue wait (schedstat) over the keystrokes' window, per key
            "run_queue_wait_per_key_ms": {w: r3(ms / len(d["echo"]), 2) for w, ms in d.get("wait", {}).items()}
            if d["echo"] else None,
            "app_cpu_pct": r3(d["app_s"] * 100000 / d["window_ms"], 1) if d["window_ms"] else None,
        }
    c = out["cases"]
    out["ratios"] = []
    for d in c.values():
        if d["variant"] != "stack":
            continue
        for base in ("nodepty", "sdrun-pty"):
            b = c.get("%s|%d|%s" % (base, d["neighbours"], d["pace"]))
            if b:
                out["ratios"].append({"baseline": base, "variant": "stack", "neighbours": d["neighbours"],
                                      "pace": d["pace"],
                                      "ratio_p50": r3(ratio(b["echo_p50_ms"], d["echo_p50_ms"])),
                                      "ratio_p99": r3(ratio(b["echo_p99_ms"], d["echo_p99_ms"]))})
    for d in c.values():
        idle = c.get("%s|0|%s" % (d["variant"], d["pace"]))
        if idle and d["neighbours"]:
            d["p50_over_idle"] = r3(ratio(d["echo_p50_ms"], idle["echo_p50_ms"]), 2)
            d["p99_over_idle"] = r3(ratio(d["echo_p99_ms"], idle["echo_p99_ms"]), 2)
    sp = {}
    for r in recs:
        if r.get("kind") == "interactive_spawn":
            d = sp.setdefault("%s|%d" % (r["variant"], r["neighbours"]),
                              {"variant": r["variant"], "neighbours": r["neighbours"], "exit": [], "errors": []})
            d["exit"] += r["exit_ms"]
            d["errors"] += r.get("errors", [])
    out["spawn"] = {}
    for k, d in sorted(sp.items(), key=lambda x: (x[1]["variant"], x[1]["neighbours"])):
        out["spawn"][k] = {"variant": d["variant"], "neighbours": d["neighbours"], "n": len(d["exit"]),
                           "errors": d["errors"][:10], "exit_p50_ms": r3(pct(d["exit"], 50), 1),
                           "exit_p99_ms": r3(pct(d["exit"], 99), 1)}
    # Ratios from the unrounded medians.
    p50 = {k: pct(d["exit"], 50) for k, d in sp.items()}
    slow = {k: ratio(p50[k], p50.get("%s|0" % d["variant"])) for k, d in sp.items() if d["neighbours"]}
    for k, d in out["spawn"].items():
        if slow.get(k) is not None:
            d["p50_over_idle"] = r3(slow[k], 2)
        b = slow.get("nodepty|%d" % d["neighbours"])
        if d["variant"] == "stack" and slow.get(k) is not None and b:
            d["slowdown_over_nodepty_slowdown"] = r3(slow[k] / b, 2)
    return out


def scale_summary(recs, env):
    samples = {r["label"]: r for r in recs if r.get("kind") == "sample"}
    levels = [r for r in recs if r.get("kind") == "scale_level"]
    out = {}

    def mem(s):
        if not s:
            return None
        st, sm = s.get("status", {}), s.get("smaps_rollup", {})
        return {"VmRSS_kb": st.get("VmRSS"), "RssAnon_kb": st.get("RssAnon"), "RssFile_kb": st.get("RssFile"),
                "Pss_kb": sm.get("Pss"), "Private_Dirty_kb": sm.get("Private_Dirty"), "VmHWM_kb": st.get("VmHWM"),
                "fds": s.get("fds"), "cpu_s": s.get("cpu_s")}
    out["idle"] = mem(samples.get("idle"))
    by_map = [r for r in recs if r.get("kind") == "idle_rss_by_mapping"]
    if by_map and out["idle"]:
        out["idle"]["rss_by_mapping_kb"] = dict(list(by_map[0]["kb"].items())[:8])
    gone = [r for r in recs if r.get("kind") == "scale_gone"]
    if gone:
        out["all_units_gone_after_close_s"] = gone[0]["seconds"]
    out["leftover_units"] = [r for r in recs if r.get("kind") == "leftover_units"]
    out["bus_health"] = [r for r in recs if r.get("kind") == "bus_health"]
    for lab in ("after-throughput", "before-scale", "after-scale", "after-stream"):
        if lab in samples:
            out[lab] = mem(samples[lab])
    base = samples.get("before-scale")
    if levels and base:
        out["levels"] = []
        prev = 0
        for lv in levels:
            s, held = samples.get("scale-%d" % lv["level"]), samples.get("scale-%d-held" % lv["level"])
            m = mem(s)
            n = lv["reached"]
            row = {"level": lv["level"], "reached": n, "failed": lv["failed"], "errors": lv["errors"],
                   "ramp_s": r3(lv["ramp_ms"] / 1000, 1), "memory": m,
                   "units": s.get("units") if s else None, "slice_tasks": s.get("slice_tasks") if s else None}
            if m and n:
                bm = mem(base)
                row["rss_per_session_kb"] = r3((m["VmRSS_kb"] - bm["VmRSS_kb"]) / n, 2)
                row["anon_per_session_kb"] = r3((m["RssAnon_kb"] - bm["RssAnon_kb"]) / n, 2)
                row["pss_per_session_kb"] = r3((m["Pss_kb"] - bm["Pss_kb"]) / n, 2) if m["Pss_kb"] else None
                row["fds_per_session"] = r3((m["fds"] - bm["fds"]) / n, 2)
            if lv.get("sup_cpu_ramp_s") is not None and n > prev:
                row["sup_cpu_ms_per_started_session"] = r3(lv["sup_cpu_ramp_s"] * 1000 / (n - prev), 2)
            if s and held:
                row["sup_cpu_idle_pct"] = r3((held["cpu_s"] - s["cpu_s"]) / held.get("hold_s", 10) * 100, 2)
            out["levels"].append(row)
            prev = n
        pss = [lv.get("rss_per_session_kb") for lv in out["levels"] if lv.get("rss_per_session_kb") is not None]
        if len(pss) >= 2:
            out["growth_rss_per_session_last_over_first"] = r3(ratio(pss[-1], pss[0]))
    streams = [r for r in recs if r.get("kind") == "stream"]
    if streams:
        out["stream"] = []
        mib = env.get("stream_mib")
        for s in streams:
            payload = s["sessions"] * mib
            out["stream"].append({
                "sessions": s["sessions"], "ok": s["ok"], "errors": s["errors"], "payload_mib": payload,
                "bytes": s["bytes"], "started": s.get("started"), "start_errors": s.get("start_errors"),
                # each session also echoes the line that set it off ("\r\n")
                "complete": s["bytes"] == s["sessions"] * (mib * MIB + mib * MIB // 100 + 2),
                "container_cpu_ms_per_mib": r3(s["container_cpu_s"] * 1000 / payload, 2) if s.get("container_cpu_s") is not None else None,
                "wall_s": r3(s["wall_ms"] / 1000, 2),
                "aggregate_mib_per_s": r3(payload / (s["wall_ms"] / 1000), 1),
                "sup_cpu_ms_per_mib": r3(s["sup_cpu_s"] * 1000 / payload, 2) if s["sup_cpu_s"] is not None else None,
                "client_cpu_ms_per_mib": r3(s["client_cpu_s"] * 1000 / payload, 2),
                "sup_rss_before_kb": s["sup_rss_before_kb"], "sup_rss_peak_kb": s["sup_rss_peak_kb"],
                "rss_per_streaming_session_kb": r3((s["sup_rss_peak_kb"] - s["sup_rss_before_kb"]) / s["sessions"], 1)
                if s["sup_rss_before_kb"] else None,
            })
        c = [s["sup_cpu_ms_per_mib"] for s in out["stream"] if s["sup_cpu_ms_per_mib"]]
        if len(c) >= 2:
            out["growth_cpu_per_mib_last_over_first"] = r3(ratio(c[-1], c[0]))
    return out


def strace_summary(recs):
    st = [r for r in recs if r.get("kind") == "strace_pump"]
    run = [r for r in recs if r.get("profile") == "strace" and r.get("kind") == "throughput"]
    if not st or not run:
        return None
    out = dict(st[0])
    tr = st[0].get("transfer") or st[0]["whole"]
    mib = tr["bytes"].get("sendto", 0) / MIB
    out["output_mib"] = r3(mib, 2)
    out["calls_per_mib"] = {k: r3(v / mib, 1) for k, v in sorted(tr["calls"].items(), key=lambda x: -x[1])} if mib else {}
    out["mean_bytes"] = tr["mean_bytes"]
    out["profile_run"] = run[0]
    return out


def profile_summary(path, recs):
    if not path or not os.path.exists(path):
        return None
    text = open(path).read()
    total = None
    fns = {"exclusive": [], "inclusive": []}
    part = "exclusive"
    for line in text.splitlines():
        if line.startswith("== inclusive"):
            part = "inclusive"
            continue
        m = re.match(r"^\s*([\d,]+)\s+(?:\(\s*([\d.]+)%\)\s+)?PROGRAM TOTALS", line)
        if m and total is None:
            total = int(m.group(1).replace(",", ""))
            continue
        m = re.match(r"^\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(\S.*)$", line)
        if m and len(fns[part]) < 200:
            fns[part].append({"ir": int(m.group(1).replace(",", "")), "pct": float(m.group(2)), "fn": m.group(3).strip()})
    run = [r for r in recs if r.get("profile") == "callgrind" and r.get("kind") == "throughput"]
    pumped = run[0]["bytes"] if run else None
    def short(fn):
        # "???:opencode::daemon::Pump::ReadPty() [/usr/...]" -> "Pump::ReadPty"
        fn = re.sub(r"\s*\[[^\]]*\]$", "", fn.split(":", 1)[1] if fn.startswith("???:") else fn)
        depth, out = 0, ""
        for ch in fn:  # drop template and parameter lists
            if ch in "<(":
                depth += 1
            elif ch in ">)":
                depth -= 1
            elif depth == 0:
                out += ch
        out = out.replace("opencode::daemon::", "").replace("(anonymous namespace)::", "").replace("[abi:cxx11]", "")
        return out.lstrip(":").strip()
    own = [dict(f, fn=short(f["fn"])) for f in fns["inclusive"]
           if "opencode::daemon::" in f["fn"] and "_M_invoke" not in f["fn"] and "_Rb_tree" not in f["fn"]]
    seen, top_own = set(), []
    for f in own:
        if f["fn"] not in seen:
            seen.add(f["fn"])
            top_own.append(f)
    return {"tool": "valgrind --tool=callgrind (instructions: Ir)", "total_ir": total,
            "top_supervisor_inclusive": top_own[:15],
            "bytes_pumped": pumped, "ir_per_output_byte": r3(ratio(total, pumped), 2),
            "top_exclusive": fns["exclusive"][:25], "top_inclusive": fns["inclusive"][:25],
            "profile_run": run[0] if run else None}


# ------------------------------------------------------------------ markdown ----

def fmt(x, unit="", nd=1):
    if x is None:
        return "n/a"
    return ("%." + str(nd) + "f%s") % (x, unit)


def markdown(s, cmd):
    L = ["| figure | measured | baseline in the same run | ratio | reproduce |", "|---|---|---|---|---|"]
    t = s.get("throughput")
    run = "`%s`" % cmd
    if t:
        v = t["variants"]

        def tv(name):
            d = v.get(name) or {}
            lost = d.get("lost_tail_bytes")
            return "%s MiB/s, %s ms CPU/MiB (%d/%d runs complete%s; median %s s transfer, %s s spawn→exit)" % (
                fmt(d.get("mib_per_s")), fmt(d.get("container_cpu_ms_per_mib"), "", 1), d.get("complete", 0), d.get("runs", 0),
                "; %d lost the last %s bytes" % (len(lost), "/".join(str(x) for x in lost)) if lost else "",
                fmt((d.get("median_transfer_ms") or 0) / 1000, "", 2) if d.get("median_transfer_ms") else "n/a",
                fmt((d.get("median_total_ms") or 0) / 1000, "", 2) if d.get("median_total_ms") else "n/a")
        names = {"stack": "stack (cat → PTY → script → supervisor → Node client)",
                 "script": "bare script, stdout a pipe read by Node",
                 "nodepty": "node-pty %s" % s["env"].get("node_pty", ""),
                 "sdrun-pty": "systemd-run --wait --pty, stdout a pipe read by Python",
                 "script-py": "bare script, stdout a pipe read by Python"}
        for rt in t["ratios"]:
            L.append("| throughput %d MiB: %s | %s | %s: %s | **%s×** transfer (paired %s×); %s× spawn→exit; **%s×** CPU cost | %s |" % (
                t["file_mib"], names.get(rt["variant"], rt["variant"]), tv(rt["variant"]),
                names.get(rt["baseline"], rt["baseline"]), tv(rt["baseline"]),
                fmt(rt["ratio_transfer"], "", 3), fmt(rt["ratio_transfer_paired_median"], "", 3),
                fmt(rt["ratio_total"], "", 3), fmt(rt.get("ratio_cpu_cost"), "", 3), run))
        st = v.get("stack", {})
        L.append("| supervisor CPU per MiB pumped (1 stream) | %s ms/MiB (user %s, system %s); %s loop wakeups/MiB; %s minor page faults/MiB; Node client %s ms/MiB (bare-script reader %s) | — | — | %s |" % (
            fmt(st.get("sup_cpu_ms_per_mib"), "", 2), fmt(st.get("sup_user_ms_per_mib"), "", 2), fmt(st.get("sup_sys_ms_per_mib"), "", 2),
            fmt(st.get("sup_wakeups_per_mib"), "", 0), fmt(st.get("sup_minor_faults_per_mib"), "", 0), fmt(st.get("client_cpu_ms_per_mib"), "", 2),
            fmt(v.get("script", {}).get("client_cpu_ms_per_mib"), "", 2), run))
    la = s.get("latency")
    if la:
        c = la["cases"]

        def lv(name, key):
            d = c.get(name)
            if not d:
                return "n/a"
            started = "; `started` envelope p50 %s ms" % fmt(d["started_p50_ms"]) if d.get("started_p50_ms") else ""
            return "p50 %s ms, p99 %s ms (n=%d, ok %d%s)" % (fmt(d[key + "_p50_ms"]), fmt(d[key + "_p99_ms"]), d["n"], d["ok"], started)
        for rt in la["ratios"]:
            bn, bk = rt["baseline"].rsplit(" ", 1)
            on, ok = rt["variant"].rsplit(" ", 1)
            what = {"exit": "spawn → exit", "first": "connect → first output byte"}[ok]
            L.append("| start latency `%s`, %s: stack | %s | %s: %s | p50 **%s×**, p99 %s× (baseline ÷ stack: > 1 means the stack is faster) | %s |" % (
                on.split(": ")[1], what, lv(on, ok), bn.split(": ")[0], lv(bn, bk),
                fmt(rt["ratio_p50"], "", 2), fmt(rt["ratio_p99"], "", 2), run))
        st = c.get("stack: true")
        bd = la.get("supervisor_breakdown")
        if st:
            parts = "spawn() → socket connected %s ms → helper exited %s ms → `started` %s ms → exit envelope %s ms (medians, from the client)" % (
                fmt(st.get("connect_p50_ms")), fmt(st.get("helper_exit_p50_ms")), fmt(st.get("started_p50_ms")), fmt(st.get("exit_p50_ms")))
            if bd:
                parts += "; supervisor journal: " + "; ".join("%s %s ms" % (k, fmt(v)) for k, v in bd["median_ms"].items())
            L.append("| where a stack session's start goes (`true`) | %s | — | — | %s |" % (parts, run))
        for cmd, ch in (la.get("script_chain") or {}).items():
            L.append("| the script chain's share of the stack's excess over systemd-run (`%s`, %s) | stack p50 %s ms − systemd-run %s ms = **%s ms** excess; the same script line under systemd-run (sdrun-script) %s ms, so the chain is **%s ms** (%s of the excess) and **%s ms** is the rest (supervisor, helper, bus, launcher steps) | sdrun-pty, sdrun-script | — | %s |" % (
                cmd, "spawn → exit" if ch["measure"] == "exit" else "first byte",
                fmt(ch["stack_p50_ms"]), fmt(ch["sdrun_p50_ms"]), fmt(ch["excess_ms"]), fmt(ch["sdrun_script_p50_ms"]),
                fmt(ch["chain_ms"]), "%d%%" % round(100 * ch["chain_share"]) if ch.get("chain_share") is not None else "n/a",
                fmt(ch["rest_ms"]), run))
        tl = la.get("timeline")
        if tl and tl["events"]:
            steps = []
            for e in tl["events"]:
                w = e["what"].replace("D-Bus ", "").replace("connection ", "conn ")
                if e.get("envelope"):
                    w += " `%s`" % e["envelope"]
                steps.append("%s %s" % (fmt(e["ms"], "", 2), w))
            L.append("| one traced start of `true` (strace of the supervisor, ms since accept4; slower than untraced) | %s | — | — | %s |" % (
                " → ".join(steps), run))
    sc = s.get("scale") or {}
    if sc.get("idle"):
        i = sc["idle"]
        maps = ", ".join("%s %d" % (k.rsplit("/", 1)[-1], v) for k, v in list((i.get("rss_by_mapping_kb") or {}).items())[:5])
        L.append("| idle supervisor (0 sessions, after warm-up) | VmRSS %s KiB (RssAnon %s, RssFile %s), Pss %s KiB; largest mappings (KiB): %s | — | — | %s |" % (
            i["VmRSS_kb"], i["RssAnon_kb"], i["RssFile_kb"], i["Pss_kb"], maps, run))
    for lv_ in sc.get("levels", []):
        m = lv_.get("memory") or {}
        L.append("| %d concurrent idle sessions (reached %d) | VmRSS %s KiB; **%s KiB/session** RSS (anon %s, Pss %s); %s fds/session; start %s ms CPU/session; idle CPU %s%% | the same supervisor before the sessions | — | %s |" % (
            lv_["level"], lv_["reached"], m.get("VmRSS_kb"), fmt(lv_.get("rss_per_session_kb"), "", 1),
            fmt(lv_.get("anon_per_session_kb"), "", 1), fmt(lv_.get("pss_per_session_kb"), "", 1),
            fmt(lv_.get("fds_per_session"), "", 2), fmt(lv_.get("sup_cpu_ms_per_started_session"), "", 2),
            fmt(lv_.get("sup_cpu_idle_pct"), "", 2), run))
    for bh in sc.get("bus_health", []):
        left = [x for x in sc.get("leftover_units", []) if x["after"] == bh["after"]]
        c = bh["counts"]
        L.append("| bus limits during the %s phase (journal) | dbus-daemon refused systemd's match rules %d× (max_match_rules_per_connection), the supervisor's pending replies %d× (max_replies_per_connection); systemd re-activated on the bus %d×; supervisor: %d units not proven gone, %d sessions failed, %d connections refused; session units left running after the application closed every session: **%s** | — | — | %s |" % (
            bh["after"], c.get("max_match_rules_per_connection", 0), c.get("max_replies_per_connection", 0),
            c.get("Successfully activated service 'org.freedesktop.systemd1'", 0), c.get("not proven gone", 0),
            c.get("session failed", 0), c.get("connection refused", 0), left[0]["units"] if left else "n/a", run))
    for st in sc.get("stream", []):
        L.append("| %d concurrent streaming sessions (%d MiB each) | supervisor **%s ms CPU/MiB**; whole container %s ms CPU/MiB; %s MiB/s aggregate; peak RSS %s KiB (%s KiB/streaming session); %d/%d ok | 1 stream in the same run | — | %s |" % (
            st["sessions"], st["payload_mib"] // st["sessions"], fmt(st["sup_cpu_ms_per_mib"], "", 2),
            fmt(st.get("container_cpu_ms_per_mib"), "", 1),
            fmt(st["aggregate_mib_per_s"]), st["sup_rss_peak_kb"], fmt(st["rss_per_streaming_session_kb"]),
            st["ok"], st["sessions"], run))
    ia = s.get("interactive")
    if ia:
        c = ia["cases"]
        names = {"stack": "stack", "nodepty": "node-pty %s (same Node process)" % s["env"].get("node_pty", ""),
                 "sdrun-pty": "`systemd-run --pty` (root's Python)"}

        def iv(d):
            load = ""
            if d["neighbours"]:
                load = "; neighbours %s MiB/s" % fmt(d.get("neighbour_mib_per_s"))
                if d.get("sup_cpu_ms_per_mib") is not None:
                    load += ", supervisor %s ms CPU/MiB (%s%% CPU)" % (fmt(d["sup_cpu_ms_per_mib"], "", 2), fmt(d.get("sup_cpu_pct")))
                if d.get("forwarder_cpu_ms_per_mib") is not None:
                    load += ", systemd-run processes %s ms CPU/MiB" % fmt(d["forwarder_cpu_ms_per_mib"], "", 2)
                load += ", application %s ms CPU/MiB (%s%% CPU)" % (fmt(d.get("app_cpu_ms_per_mib"), "", 2), fmt(d.get("app_cpu_pct")))
                if d.get("run_queue_wait_per_key_ms"):
                    load += "; run-queue wait per key: " + ", ".join(
                        "%s %s ms" % ({"relay": "the session's script"}.get(k, k), fmt(v, "", 2))
                        for k, v in sorted(d["run_queue_wait_per_key_ms"].items()))
                if d.get("p50_over_idle"):
                    load += "; %s× / %s× its idle p50 / p99" % (fmt(d["p50_over_idle"], "", 2), fmt(d.get("p99_over_idle"), "", 2))
            return "p50 %s ms, p99 %s ms (%d keys, %d lost%s)" % (
                fmt(d["echo_p50_ms"], "", 2), fmt(d["echo_p99_ms"], "", 2), d["keys"], d["lost"], load)
        pace_name = lambda d: "human pace (%s ms apart)" % fmt(d["gap_ms"], "", 0) if d["pace"] == "human" else "fast pace (next key on the echo)"
        for d in c.values():
            if d["variant"] != "stack":
                continue
            bases = [(b, c.get("%s|%d|%s" % (b, d["neighbours"], d["pace"]))) for b in ("nodepty", "sdrun-pty")]
            bases = [(b, x) for b, x in bases if x]
            rts = {rt["baseline"]: rt for rt in ia["ratios"] if rt["neighbours"] == d["neighbours"] and rt["pace"] == d["pace"]}
            L.append("| keystroke echo, %d streaming `yes` neighbours, %s: stack | %s | %s | %s | %s |" % (
                d["neighbours"], pace_name(d), iv(d),
                "; ".join("%s: %s" % (names[b], iv(x)) for b, x in bases) or "—",
                "; ".join("%s ÷ stack: p50 **%s×**, p99 %s×" % (names[b].split(" (")[0], fmt(rts[b]["ratio_p50"], "", 2), fmt(rts[b]["ratio_p99"], "", 2))
                          for b, _ in bases if b in rts) or "—", run))
        for d in c.values():
            if d["variant"] == "stack" or c.get("stack|%d|%s" % (d["neighbours"], d["pace"])):
                continue
            L.append("| keystroke echo, %d streaming `yes` neighbours, %s: %s | %s | — | — | %s |" % (
                d["neighbours"], pace_name(d), names.get(d["variant"], d["variant"]), iv(d), run))
        for d in ia["spawn"].values():
            if d["variant"] != "stack" or not d["neighbours"]:
                continue
            b = ia["spawn"].get("nodepty|%d" % d["neighbours"])
            L.append("| `true` spawn → exit next to %d streaming neighbours: stack | p50 %s ms, p99 %s ms (n=%d%s); **%s×** its idle p50 | %s | stack's slowdown ÷ node-pty's: **%s×** | %s |" % (
                d["neighbours"], fmt(d["exit_p50_ms"]), fmt(d["exit_p99_ms"]), d["n"],
                ", errors %s" % ",".join(d["errors"]) if d["errors"] else "", fmt(d.get("p50_over_idle"), "", 2),
                "node-pty: p50 %s ms, p99 %s ms (n=%d), %s× its idle p50" % (fmt(b["exit_p50_ms"]), fmt(b["exit_p99_ms"]), b["n"], fmt(b.get("p50_over_idle"), "", 2)) if b else "—",
                fmt(d.get("slowdown_over_nodepty_slowdown"), "", 2), run))
    sy = s.get("syscalls")
    if sy:
        L.append("| supervisor system calls per MiB of output while pumping (strace, the transfer part of one stack run, %s MiB) | %s; mean bytes per call: %s | — | — | %s |" % (
            fmt(sy["output_mib"]), ", ".join("%s %s" % (k, fmt(v)) for k, v in sy["calls_per_mib"].items()),
            ", ".join("%s %s" % (k, fmt(v, "", 0)) for k, v in sy["mean_bytes"].items()), run))
    p = s.get("profile")
    if p and p.get("total_ir"):
        top = ", ".join("%s %.1f%%" % (f["fn"], f["pct"]) for f in p.get("top_supervisor_inclusive", [])[:8])
        L.append("| profile (callgrind, one %s session through the stack) | %s Ir/output byte in the supervisor; its own functions, inclusive: %s | — | — | %s |" % (
            (p.get("profile_run") or {}).get("file", "?").rsplit("-", 1)[-1].replace("M", " MiB"), fmt(p["ir_per_output_byte"], "", 1), top, run))
    return "\n".join(L)


# --------------------------------------------------------------------- chart ----

def draw(s, path):
    """One panel per measured phase (none for a phase the run left out); in
    each the baseline of its figure is drawn grey next to it."""
    import chart  # matplotlib: only when a chart is asked for (--png)

    panels = []
    t = s.get("throughput")
    if t:
        order = [("script", "bare script\n(Node reads)"), ("stack", "stack"), ("nodepty", "node-pty"),
                 ("script-py", "bare script\n(Python reads)"), ("sdrun-pty", "systemd-run\n--pty")]
        order = [o for o in order if o[0] in t["variants"]]
        base = {"stack": "script", "nodepty": "script", "sdrun-pty": "script-py"}

        def p_throughput(ax):
            vals = [[t["variants"][k].get("mib_per_s")] for k, _ in order]
            labels = []
            for k, _ in order:
                v = t["variants"][k].get("mib_per_s")
                b_ = t["variants"].get(base.get(k, ""), {}).get("mib_per_s")
                labels.append(["%s\n(%.2f× its baseline)" % (chart.fmt(v), v / b_) if v and b_ else chart.fmt(v)])
            chart.bars(ax, "throughput, MiB/s (median transfer; grey: the bare-script baselines)",
                       [n for _, n in order], ["MiB/s"], vals, labels,
                       note="%d MiB file, %d rounds interleaved" % (t["file_mib"], s["env"].get("rounds", 0)),
                       baseline_groups=[n for k, n in order if k.startswith("script")])
        panels.append(p_throughput)
    la = s.get("latency")
    if la:
        cases = [("stack: true", "exit", "stack\ntrue → exit"), ("sdrun-script: true", "exit", "sdrun-script\ntrue (floor)"),
                 ("sdrun-pty: true", "exit", "systemd-run --pty\ntrue"),
                 ("stack: echo hi", "first", "stack\necho 1st byte"), ("sdrun-script: echo hi", "first", "sdrun-script\necho (floor)"),
                 ("sdrun-pty: echo hi", "first", "systemd-run --pty\necho 1st"), ("sdrun-pipe: echo hi", "first", "systemd-run --pipe\necho 1st")]
        cases = [x for x in cases if x[0] in la["cases"]]

        def p_latency(ax):
            vals = [[la["cases"][k][f + "_p50_ms"], la["cases"][k][f + "_p99_ms"]] for k, f, _ in cases]
            chart.bars(ax, "start latency, ms (grey: systemd-run baselines; sdrun-script = the seed's chain, the floor)",
                       [n for _, _, n in cases], ["p50", "p99"], vals,
                       note="sequential sessions, %d per case" % (s["env"].get("lat_n", 0) * s["env"].get("lat_rounds", 0)),
                       baseline_groups=[n for k, _, n in cases if k.startswith("sdrun")])
        panels.append(p_latency)
    sc = s.get("scale") or {}
    if sc.get("levels"):
        def p_scale(ax):
            groups = ["0 sessions\n(baseline)"] + [str(lv["reached"]) for lv in sc["levels"]]
            b_ = (sc.get("before-scale") or {}).get("VmRSS_kb")
            vals = [[b_ / 1024 if b_ else None]] + [[((lv["memory"] or {}).get("VmRSS_kb") or 0) / 1024] for lv in sc["levels"]]
            labels = [[chart.fmt(vals[0][0])]] + [["%s\n(%s KiB/session)" % (chart.fmt(v[0]), chart.fmt(lv.get("rss_per_session_kb")))]
                                                  for v, lv in zip(vals[1:], sc["levels"])]
            chart.bars(ax, "supervisor VmRSS, MiB, by concurrent idle sessions", groups, ["VmRSS"], vals, labels,
                       note="KiB/session: above the same supervisor with 0 sessions", baseline_groups=[groups[0]])
        panels.append(p_scale)
    if sc.get("stream"):
        def p_stream(ax):
            groups, vals = [], []
            basename = None
            if t and t["variants"].get("stack", {}).get("sup_cpu_ms_per_mib") is not None:
                basename = "1 stream\n(throughput, %d MiB)" % t["file_mib"]
                groups.append(basename)
                vals.append([t["variants"]["stack"]["sup_cpu_ms_per_mib"]])
            for st in sc["stream"]:
                groups.append("%d × %d MiB" % (st["sessions"], st["payload_mib"] // st["sessions"]))
                vals.append([st["sup_cpu_ms_per_mib"]])
            chart.bars(ax, "supervisor CPU ms per MiB pumped, by concurrent streams", groups, ["ms/MiB"], vals,
                       note="utime+stime from /proc", baseline_groups=[basename] if basename else [])
        panels.append(p_stream)
    ia = s.get("interactive")
    if ia:
        vname = {"stack": "stack", "nodepty": "node-pty", "sdrun-pty": "sd-run --pty"}
        for pace in ("human", "fast"):
            cs = [d for d in ia["cases"].values() if d["pace"] == pace]
            if not cs:
                continue
            cs.sort(key=lambda d: (d["neighbours"], ["stack", "nodepty", "sdrun-pty"].index(d["variant"])
                                   if d["variant"] in vname else 9))

            def p_echo(ax, cs=cs, pace=pace):
                groups = ["%s\n%d nb" % (vname.get(d["variant"], d["variant"]), d["neighbours"]) for d in cs]
                chart.bars(ax, "keystroke → echo, ms, %s pace (grey: node-pty, systemd-run --pty)" % pace
                           + (" %s ms apart" % chart.fmt(cs[0]["gap_ms"]) if pace == "human" else ""),
                           groups, ["p50", "p99"], [[d["echo_p50_ms"], d["echo_p99_ms"]] for d in cs],
                           note="nb: `yes` neighbours streaming, read by the same process; log scale",
                           baseline_groups=[g for g, d in zip(groups, cs) if d["variant"] != "stack"], log=True)
            panels.append(p_echo)
        if ia.get("spawn"):
            sp = sorted(ia["spawn"].values(), key=lambda d: (d["neighbours"], d["variant"] != "stack"))

            def p_spawn(ax):
                groups = ["%s\n%d nb" % (vname.get(d["variant"], d["variant"]), d["neighbours"]) for d in sp]
                labels = [["%s\n(%s× idle)" % (chart.fmt(d["exit_p50_ms"]), chart.fmt(d["p50_over_idle"]))
                           if d.get("p50_over_idle") else None, None] for d in sp]
                chart.bars(ax, "`true` spawn → exit under load, ms (grey: node-pty in the same process)", groups,
                           ["p50", "p99"], [[d["exit_p50_ms"], d["exit_p99_ms"]] for d in sp], labels,
                           note="each against its own 0-neighbour figure; log scale",
                           baseline_groups=[g for g, d in zip(groups, sp) if d["variant"] != "stack"], log=True)
            panels.append(p_spawn)
    sched = s["env"].get("sched") or {}
    fig, axes = chart.figure(len(panels), "opencode-pty bench %s, commit %s, %s%s" % (
        s["timestamp"], s["host"].get("commit", "")[:12], s["env"].get("systemd", ""),
        ", cgroup %s" % sched["cgroup"] if sched.get("cgroup") else ""))
    if fig is None:
        return False
    for fn, ax in zip(panels, axes):
        fn(ax)
    chart.save(fig, path)
    return True


def update_readme(path, table, summary):
    text = open(path).read()
    begin, end = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"
    if begin not in text or end not in text:
        print("report: no bench:results markers in %s; not updated" % path, file=sys.stderr)
        return
    head = ("Run %s, commit `%s`%s; machine: %s, %s cores, %s GiB, %s (kernel %s), load average before %s, after %s; "
            "container: %s, Node %s, %s.\n\n" % (
                summary["timestamp"], summary["host"].get("commit", "?")[:12],
                " (daemon/common/client/launcher/units modified)" if summary["host"].get("dirty") else "",
                summary["host"].get("cpu"), summary["host"].get("cores"), summary["host"].get("mem_gib"),
                summary["host"].get("host_os"), summary["host"].get("host_kernel"),
                summary["host"].get("loadavg_before", "?").split(" ")[0], summary["host"].get("loadavg_after", "?").split(" ")[0],
                summary["env"].get("systemd"), summary["env"].get("node"), summary["env"].get("script")))
    new = text[:text.index(begin) + len(begin)] + "\n" + head + table + "\n" + text[text.index(end):]
    open(path, "w").write(new)


def rerender(a):
    """Table and chart from a summary written by this script: no records needed."""
    s = json.load(open(a.from_summary))
    if "records" in s:
        print("report: %s still carries raw records; bench/run writes summaries without them" % a.from_summary,
              file=sys.stderr)
    table = markdown(s, s.get("command", "bench/run"))
    if a.png:
        draw(s, a.png)
    if a.readme:
        update_readme(a.readme, table, s)
    print(table)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from-summary", help="re-render a committed summary JSON (no records needed)")
    ap.add_argument("--records")
    ap.add_argument("--env")
    ap.add_argument("--host")
    ap.add_argument("--command", default="bench/run")
    ap.add_argument("--json")
    ap.add_argument("--raw-json", help="also write the summary with every raw record here (the run's folder)")
    ap.add_argument("--png")
    ap.add_argument("--callgrind")
    ap.add_argument("--readme")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.from_summary:
        return rerender(a)
    if not (a.records and a.env and a.host and a.json):
        ap.error("--records, --env, --host and --json are required (or --from-summary)")
    recs = [json.loads(line) for line in open(a.records) if line.strip()]
    env = json.load(open(a.env))
    host = json.load(open(a.host))
    ts = os.path.basename(a.json).rsplit(".", 1)[0]
    s = {"schema": 1, "timestamp": ts, "command": a.command, "quick": a.quick, "host": host, "env": env}
    s["throughput"] = throughput_summary(recs, env)
    s["latency"] = latency_summary(recs)
    s["scale"] = scale_summary(recs, env)
    s["profile"] = profile_summary(a.callgrind, recs)
    s["syscalls"] = strace_summary(recs)
    s["interactive"] = interactive_summary(recs)
    table = markdown(s, a.command)
    s["table_markdown"] = table
    # Where the raw records are: the run's output folder, not git (issue #16:
    # they were ~15,000 lines per committed run).
    raw = open(a.records, "rb").read()
    s["raw"] = {"folder": os.path.dirname(os.path.abspath(a.records)), "records": len(recs),
                "records_sha256": hashlib.sha256(raw).hexdigest()}
    with open(a.json, "w") as f:
        json.dump(s, f, indent=1)
        f.write("\n")
    if a.raw_json:
        with open(a.raw_json, "w") as f:
            json.dump(dict(s, records=recs), f, indent=1)
            f.write("\n")
    if a.png:
        draw(s, a.png)
    if a.readme:
        update_readme(a.readme, table, s)
    print(table)


if __name__ == "__main__":
    main()
