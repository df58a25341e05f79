"""bench/lib/figstyle.py: the look every matplotlib chart of the project
shares (bench/lib/chart.py's bar panels, vm-tests/faults/plot.py's line
panels): the Agg backend, the colours, the panels' font sizes and grid, and
how a figure is saved. Importing it sets them; a caller takes pyplot from
here (`from figstyle import plt`) so that nothing draws with another set-up.

It lives in bench/lib because that folder is already on the import path of
the bench's charts: report.py runs from it, so chart.py imports it as its
neighbour. plot.py runs on the host after a VM run, where the checkout is
whole; its callers (vm-tests/soak, vm-tests/faults/campaign) put bench/lib on
PYTHONPATH, so neither script edits sys.path.
matplotlib is Debian's python3-matplotlib, run by /usr/bin/python3 (tools/install-deps
installs it).
"""
import matplotlib

matplotlib.use("Agg")  # no display on these machines
import matplotlib.pyplot as plt  # noqa: E402  (after the backend; the callers take it from here)

# One series colour per curve or bar series, in this order, in every chart.
COLOURS = ["#4272c4", "#ed7d31", "#70ad47", "#a569bd", "#5b9bd5", "#c9a000", "#9e480e"]

# Small type: a figure holds several panels, each with long group names,
# labels over the bars or a legend of several baselines.
matplotlib.rcParams.update({
    "axes.titlesize": 10,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "grid.alpha": 0.3,
})


def save(fig, path):
    """Lays the panels out under the figure's title and writes the PNG."""
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    # No date or version in the file: the same data draws the same bytes.
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
