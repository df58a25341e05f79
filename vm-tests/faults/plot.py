#!/usr/bin/python3
"""vm-tests/faults/plot.py: PNG line charts of the soak and of the fault
campaign's connection churn, drawn on the host after a run (the guest has no
bench/ folder) with matplotlib (Debian's python3-matplotlib, as for bench/:
apt-get install python3-matplotlib), in the style the bench's charts share
(bench/lib/figstyle.py: colours, type sizes, how a PNG is saved). Every panel
draws the baseline its curves are judged against (the supervisor after the
warm-up) as a dashed line.

  PYTHONPATH=bench/lib vm-tests/faults/plot.py soak  RESULTS/soak.json   OUT.png
  PYTHONPATH=bench/lib vm-tests/faults/plot.py churn RESULTS/faults.json OUT.png [OUT.json]

(vm-tests/soak and vm-tests/faults/campaign set PYTHONPATH themselves.)

The churn chart also writes OUT.json: the supervisor's descriptors and RSS
sampled every 0.05 s across all churn rounds, placed on a cycles axis.
"""
import json
import sys

try:
    from figstyle import COLOURS, plt, save
except ImportError as e:
    sys.exit("plot.py: %s (figstyle.py is in bench/lib, which must be on PYTHONPATH; matplotlib is "
             "python3-matplotlib)" % e)


def line_panel(ax, title, xs, series, xlabel, marks=(), baselines=()):
    """series: [(name, ys)] with ys aligned to xs (None = no point);
    marks: x positions drawn as thin red vertical lines (faults, round edges);
    baselines: [(name, y)] drawn as dashed horizontal lines."""
    for mx in marks:
        ax.axvline(mx, color="#e6aaaa", linewidth=0.8)
    for si, (name, ys) in enumerate(series):
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if len(pts) < 200 else None,
                markersize=3, linewidth=1.2, color=COLOURS[si % len(COLOURS)], label=name)
    for bi, (name, y) in enumerate(baselines):
        if y is not None:
            ax.axhline(y, color="#666666", linestyle="--", linewidth=1, label=name)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylim(bottom=0)
    ax.grid(True)
    ax.legend(loc="lower right")


def soak_png(src, out):
    r = json.load(open(src))
    rows, t, base = r["minutes"], r["totals"], r.get("baseline") or {}
    xs = [m["minute"] for m in rows]
    fig, axes = plt.subplots(4, 1, figsize=(11, 12))
    fig.suptitle("opencode-pty soak: %d rounds of %.0f s, seed %d\n"
                 "%d sessions, %d operations, %d faults (%s), lost %d, units left %d; round 0 = warm-up; "
                 "red lines: supervisor SIGKILLed in that round" % (
                     r["rounds"], r["round_seconds"], r["seed"], t["sessions"], t["ops_done"], t["faults_injected"],
                     ", ".join("%s %d" % (k.replace("daemon-", ""), v) for k, v in sorted(t["faults"].items())),
                     t["lost"], t["units_left"]), fontsize=9)
    marks = [m["minute"] for m in rows if m["fault"]["kind"] == "sigkill"]
    line_panel(axes[0], "supervisor descriptors", xs,
               [("after check", [m["fds"] for m in rows]), ("peak", [m["peak_fds"] for m in rows])],
               "round (about a minute each)", marks, [("baseline after warm-up", base.get("fds"))])
    line_panel(axes[1], "supervisor RSS (kB)", xs,
               [("RssAnon after check", [m["RssAnon"] for m in rows]),
                ("RssAnon peak", [m["peak_RssAnon"] for m in rows]),
                ("VmRSS after check", [m["VmRSS"] for m in rows])],
               "round", marks, [("RssAnon baseline after warm-up", base.get("RssAnon")),
                                ("VmRSS baseline", base.get("VmRSS"))])
    line_panel(axes[2], "live PTY units", xs,
               [("peak", [m["peak_units"] for m in rows]), ("mean", [m["mean_units"] for m in rows]),
                ("after check", [len(m["units_left"] or []) for m in rows])], "round", marks,
               [("baseline: none left", 0)])
    line_panel(axes[3], "live sessions (supervisor STATUS)", xs,
               [("peak", [m["peak_sessions"] for m in rows]), ("mean", [m["mean_sessions"] for m in rows])],
               "round", marks)
    save(fig, out)


def churn_data(src):
    r = json.load(open(src))
    case = r["cases"]["churn"]
    xs, fds, anon, rss, edges = [], [], [], [], []
    done = 0
    for rep in case["repetitions"]:
        n = rep["app_cycles"] + rep["root_cycles"]
        dur = max(rep["seconds"], 1e-3)
        edges.append(done)
        for s in rep["samples"]:
            if "fds" not in s or "t" not in s:
                continue
            # Cycles run at a steady rate within a round: place each sample by its time.
            xs.append(round(done + n * min(s["t"], dur) / dur))
            fds.append(s["fds"])
            anon.append(s.get("RssAnon"))
            rss.append(s.get("VmRSS"))
        done += n
    return {"seed": r["seed"], "cycles": done, "rounds": len(case["repetitions"]),
            "baseline": {k: case["baseline"].get(k) for k in ("fds", "RssAnon", "VmRSS")},
            "after_each_round": [{k: rep["invariant"].get(k) for k in ("fds", "RssAnon", "VmRSS")}
                                 for rep in case["repetitions"]],
            "round_starts": edges, "cycles_axis": xs, "fds": fds, "RssAnon": anon, "VmRSS": rss}


def churn_png(src, out, out_json=None):
    d = churn_data(src)
    if out_json:
        with open(out_json, "w") as f:
            json.dump(d, f, indent=None)
    fig, axes = plt.subplots(2, 1, figsize=(11, 7))
    fig.suptitle("opencode-pty connection churn: %d cycles in %d rounds, seed %d\n"
                 "supervisor sampled every 0.05 s; red lines: round starts (each round ends with the invariant "
                 "check); dashed: the baseline before the churn" % (d["cycles"], d["rounds"], d["seed"]), fontsize=9)
    marks = d["round_starts"][1:]
    line_panel(axes[0], "supervisor descriptors", d["cycles_axis"], [("fds", d["fds"])],
               "connect/close cycles (placed by time within each round)", marks,
               [("baseline fds", d["baseline"]["fds"])])
    line_panel(axes[1], "supervisor RSS (kB)", d["cycles_axis"],
               [("RssAnon", d["RssAnon"]), ("VmRSS", d["VmRSS"])], "connect/close cycles", marks,
               [("baseline RssAnon", d["baseline"]["RssAnon"]), ("baseline VmRSS", d["baseline"]["VmRSS"])])
    save(fig, out)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "soak":
        soak_png(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "churn":
        churn_png(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        sys.exit("usage: plot.py soak SOAK.json OUT.png | plot.py churn FAULTS.json OUT.png [OUT.json]")
