"""bench/lib/chart.py: the bench's bar charts, drawn with matplotlib (Debian's
python3-matplotlib; bench/run installs it when missing) in the style of
figstyle.py, which vm-tests/faults/plot.py shares. A figure has one panel per
phase the run measured, never an empty one; every panel draws the baseline
its figure is compared with next to the figure itself.
"""
import figstyle
from figstyle import COLOURS, plt

save = figstyle.save  # report.py draws and saves through this module

# The baseline's bars are grey, the measured ones coloured, in every panel.
BASELINE = "#9a9a9a"


def fmt(v):
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.2f" % v


def figure(npanels, title):
    """A figure with npanels axes (two columns), or None when there are none."""
    if npanels == 0:
        return None, []
    cols = 1 if npanels == 1 else 2
    rows = (npanels + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols if cols > 1 else 10, 4.8 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[npanels:]:
        fig.delaxes(ax)  # an odd count: no empty panel
    fig.suptitle(title, fontsize=11)
    return fig, flat[:npanels]


def bars(ax, title, groups, series, values, labels=None, note=None, baseline_groups=(), ylabel=None, log=False):
    """groups: category names; series: series names; values[g][s]: number or
    None; labels[g][s]: the text over a bar (default its value);
    baseline_groups: the groups that are baselines (drawn grey, hatched by
    series)."""
    n = max(len(series), 1)
    width = 0.8 / n
    for si, name in enumerate(series):
        xs, hs, cs, hatch = [], [], [], []
        for gi, g in enumerate(groups):
            v = values[gi][si]
            x = gi - 0.4 + width * (si + 0.5)
            if v is None:
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7)
                continue
            xs.append(x)
            hs.append(v)
            cs.append(BASELINE if g in baseline_groups else COLOURS[si % len(COLOURS)])
            lab = labels[gi][si] if labels and labels[gi] and labels[gi][si] is not None else fmt(v)
            ax.annotate(lab, (x, v), ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        b = ax.bar(xs, hs, width * 0.95, color=cs, label=name, edgecolor="black", linewidth=0.4)
        if si and len(series) > 1:
            for patch in b:
                patch.set_hatch("//")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_title(title)
    if ylabel:
        ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(True, axis="y")
    ax.margins(y=0.15)
    if len(series) > 1:
        ax.legend(loc="upper left")
    if note:
        ax.text(0.99, 0.98, note, transform=ax.transAxes, ha="right", va="top", fontsize=6.5, color="#444444",
                wrap=True)

