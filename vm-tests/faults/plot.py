#!/usr/bin/python3
"""vm-tests/faults/plot.py: PNG line charts of the soak and of the fault
campaign's connection churn, drawn on the host after a run (the guest has no
bench/ folder). Standard library only: the Canvas and 5x7 font of
bench/lib/chart.py (matplotlib is not on these machines).

  plot.py soak  RESULTS/soak.json   OUT.png
  plot.py churn RESULTS/faults.json OUT.png [OUT.json]

The churn chart also writes OUT.json: the supervisor's descriptors and RSS
sampled every 0.05 s across all churn rounds, placed on a cycles axis.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "lib"))
import chart  # noqa: E402
from chart import BLACK, DARK, GREY, PALETTE, WHITE, Canvas  # noqa: E402


def _line(c, x0, y0, x1, y1, color, width=2):
    n = int(max(abs(x1 - x0), abs(y1 - y0), 1))
    for i in range(n + 1):
        x = x0 + (x1 - x0) * i / n
        y = y0 + (y1 - y0) * i / n
        c.rect(x - width / 2, y - width / 2, x + width / 2 + 1, y + width / 2 + 1, color)


def line_panel(c, x, y, w, h, title, xs, series, xlabel, note=None, ymin0=True, marks=()):
    """series: [(name, ys)] with ys aligned to xs (None = no point);
    marks: [(x, label)] drawn as thin vertical lines (faults, round edges)."""
    c.rect(x, y, x + w, y + h, WHITE)
    c.text(x + 10, y + 8, title, BLACK, 2)
    if note:
        c.text(x + 10, y + 28, note, DARK, 1)
    top, bottom, left, right = y + 48, y + h - 36, x + 70, x + w - 15
    vals = [v for _, ys in series for v in ys if v is not None]
    vmax = chart._nice_max(max(vals or [1]) * 1.1)
    vmin = 0.0 if ymin0 else min(vals or [0])
    xmin, xmax = (min(xs), max(xs)) if xs else (0, 1)
    if xmax == xmin:
        xmax = xmin + 1

    def px(v):
        return left + (right - left) * (v - xmin) / (xmax - xmin)

    def py(v):
        return bottom - (bottom - top) * (v - vmin) / max(vmax - vmin, 1e-9)

    for i in range(5):
        gv = vmin + (vmax - vmin) * i / 4
        c.hline(left, right, int(py(gv)), GREY)
        c.text(left - 6, int(py(gv)) - 3, chart._fmt(gv), DARK, 1, "right")
    for mx, label in marks:
        c.vline(int(px(mx)), top, bottom, (230, 170, 170))
        if label:
            c.text(int(px(mx)) + 2, top - 9, label, (180, 60, 60), 1)
    c.vline(left, top, bottom + 1, DARK)
    c.hline(left, right, bottom, DARK)
    for i in range(6):
        xv = xmin + (xmax - xmin) * i / 5
        c.text(int(px(xv)), bottom + 6, chart._fmt(xv), DARK, 1, "center")
    c.text((left + right) // 2, bottom + 20, xlabel, DARK, 1, "center")
    for si, (name, ys) in enumerate(series):
        color = PALETTE[si % len(PALETTE)]
        prev = None
        for xv, yv in zip(xs, ys):
            if yv is None:
                prev = None
                continue
            p = (px(xv), py(yv))
            if prev:
                _line(c, prev[0], prev[1], p[0], p[1], color)
            c.rect(p[0] - 2, p[1] - 2, p[0] + 3, p[1] + 3, color)
            prev = p
    lx = right - sum(14 + c.text_width(n.upper()) + 20 for n, _ in series)
    for si, (name, _) in enumerate(series):
        c.rect(lx, y + 10, lx + 10, y + 20, PALETTE[si % len(PALETTE)])
        c.text(lx + 14, y + 11, name, BLACK, 1)
        lx += 14 + c.text_width(name.upper()) + 20


def soak_png(src, out):
    r = json.load(open(src))
    rows, t = r["minutes"], r["totals"]
    xs = [m["minute"] for m in rows]
    w, ph = 1000, 230
    c = Canvas(w, 60 + 4 * ph)
    c.text(10, 8, "opencode-pty soak: %d rounds of %.0f s, seed %d" % (r["rounds"], r["round_seconds"], r["seed"]),
           BLACK, 2)
    c.text(10, 30, "%d sessions, %d operations, %d faults (%s), lost %d, units left %d; round 0 = warm-up" % (
        t["sessions"], t["ops_done"], t["faults_injected"],
        ", ".join("%s %d" % (k.replace("daemon-", ""), v) for k, v in sorted(t["faults"].items())),
        t["lost"], t["units_left"]), DARK, 1)
    c.text(10, 42, "red lines: supervisor SIGKILLed in that round (a fresh instance after it)", DARK, 1)
    marks = [(m["minute"], "") for m in rows if m["fault"]["kind"] == "sigkill"]
    y = 60
    line_panel(c, 0, y, w, ph, "supervisor descriptors", xs,
               [("after check", [m["fds"] for m in rows]), ("peak", [m["peak_fds"] for m in rows])],
               "round (about a minute each)", marks=marks)
    y += ph
    line_panel(c, 0, y, w, ph, "supervisor RSS (kB)", xs,
               [("RssAnon after check", [m["RssAnon"] for m in rows]),
                ("RssAnon peak", [m["peak_RssAnon"] for m in rows]),
                ("VmRSS after check", [m["VmRSS"] for m in rows])],
               "round", marks=marks)
    y += ph
    line_panel(c, 0, y, w, ph, "live PTY units", xs,
               [("peak", [m["peak_units"] for m in rows]), ("mean", [m["mean_units"] for m in rows]),
                ("after check", [len(m["units_left"] or []) for m in rows])], "round", marks=marks)
    y += ph
    line_panel(c, 0, y, w, ph, "live sessions (supervisor STATUS)", xs,
               [("peak", [m["peak_sessions"] for m in rows]), ("mean", [m["mean_sessions"] for m in rows])],
               "round", marks=marks)
    with open(out, "wb") as f:
        f.write(c.png())


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
    w, ph = 1000, 260
    c = Canvas(w, 50 + 2 * ph)
    c.text(10, 8, "opencode-pty connection churn: %d cycles in %d rounds, seed %d" % (
        d["cycles"], d["rounds"], d["seed"]), BLACK, 2)
    c.text(10, 30, "supervisor sampled every 0.05 s; red lines: round starts (each round ends with the invariant "
           "check); baseline fds %s, RssAnon %s kB" % (d["baseline"]["fds"], d["baseline"]["RssAnon"]), DARK, 1)
    marks = [(e, "") for e in d["round_starts"][1:]]
    line_panel(c, 0, 50, w, ph, "supervisor descriptors", d["cycles_axis"], [("fds", d["fds"])],
               "connect/close cycles (placed by time within each round)", marks=marks)
    line_panel(c, 0, 50 + ph, w, ph, "supervisor RSS (kB)", d["cycles_axis"],
               [("RssAnon", d["RssAnon"]), ("VmRSS", d["VmRSS"])],
               "connect/close cycles", marks=marks)
    with open(out, "wb") as f:
        f.write(c.png())


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "soak":
        soak_png(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "churn":
        churn_png(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        sys.exit("usage: plot.py soak SOAK.json OUT.png | plot.py churn FAULTS.json OUT.png [OUT.json]")
