"""Figures of the headline tables: ``tools/repro.py --plot`` and ``tools/bench.py --plot``.

matplotlib is optional (``pip install -e ".[plot]"``): ``pyplot()`` imports
it with the file-only Agg backend, or exits with a message saying how to
install it, before any measurement starts.  The figures are drawn from the
rows the tools print (the same dictionaries as their ``--json``), so a
figure never shows a figure the table does not.
"""
from __future__ import annotations

from typing import Any

#: What --plot says when matplotlib is missing.
MISSING = "--plot needs matplotlib: pip install -e \".[plot]\" (or: pip install matplotlib)"

COLOURS = {"single-tick": "#1b7837", "per-loader-chains": "#c51b7d", "floor": "#7f7f7f",
           "floor-ours": "#b8b8b8", "n-plus-one": "#e08214", "graphql-sync-dataloaders": "#2166ac",
           "aiodataloader": "#8073ac"}


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend.

    Raises:
        SystemExit: matplotlib is not installed (the message says how to install it).
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit(MISSING) from None
    return plt


def check_path(path: str) -> None:
    """Refuse a --plot path that matplotlib could not write as PNG.

    Raises:
        SystemExit: *path* does not end in ``.png``.
    """
    if not path.lower().endswith(".png"):
        raise SystemExit(f"--plot must name a .png file, got {path!r}")


def plot_repro(rows: list[dict[str, Any]], path: str, *, loaders: int, schedule_ms: float) -> None:
    """Pending tasks and task runs per second against ``dispatch_all()`` calls, one line per variant."""
    plt = pyplot()
    fig, (pending, runs) = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True)
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = sorted((r for r in rows if r["variant"] == variant), key=lambda r: r["dispatch_all_calls"])
        calls = [r["dispatch_all_calls"] for r in mine]
        style = {"color": COLOURS.get(variant), "marker": "o", "label": variant}
        for ax, key in ((pending, "pending_tasks"), (runs, "tasks_run_per_second")):
            ax.plot(calls, [r[key] for r in mine], **style)
            for r in mine:
                ax.annotate(f"{r[key]:,}", (r["dispatch_all_calls"], r[key]),
                            textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    for ax, title in ((pending, "pending tasks in the executor"), (runs, "tasks run per second")):
        ax.set_xscale("log")
        ax.set_yscale("log")  # a zero (no tick ran) is left out of the line, as log scales do
        ax.set_ylim(bottom=0.5, top=max([r[key] for r in rows for key in ("pending_tasks", "tasks_run_per_second")]
                                        + [1]) * 4)
        ax.set_xlabel("dispatch_all() calls")
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend()
    calls = sorted({r["dispatch_all_calls"] for r in rows})
    for ax in (pending, runs):
        ax.set_xticks(calls, [str(c) for c in calls])
    fig.suptitle(f"tools/repro.py: {loaders} loaders, ticker mode, {schedule_ms:g} ms schedule\n"
                 "single tick: one pending task per registry; per-loader chains: one per loader per call")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_bench(runs: list[tuple[int, list[dict[str, Any]]]], path: str, *, title: str) -> None:
    """Process CPU per request of each variant, at each concurrency, with its ratio to the floor.

    Args:
        runs: ``(request threads, rows)`` per run of the end-to-end benchmark.
        path: the PNG to write.
        title: the figure's title (settings of the run).
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, len(runs), figsize=(5.2 * len(runs), 4.4), constrained_layout=True, squeeze=False)
    for ax, (concurrency, rows) in zip(axes[0], runs):
        ran = [r for r in rows if r.get("status") == "ran"]
        names = [r["variant"] for r in ran]
        cpu = [r["process_cpu_ms_per_request"] for r in ran]
        floor = next((r["process_cpu_ms_per_request"] for r in ran if r["variant"] == "floor"), None)
        bars = ax.bar(range(len(ran)), cpu, color=[COLOURS.get(n, "#444444") for n in names])
        for bar, value in zip(bars, cpu):
            label = f"{value:.1f} ms" + (f"\n{value / floor:.1f}× floor" if floor else "")
            ax.annotate(label, (bar.get_x() + bar.get_width() / 2, value), textcoords="offset points",
                        xytext=(0, 3), ha="center", va="bottom", fontsize=8)
        if floor:
            ax.axhline(floor, color=COLOURS["floor"], linestyle="--", linewidth=1)
        ax.set_xticks(range(len(ran)), names, rotation=20, ha="right")
        ax.set_ylabel("process CPU ms per request")
        ax.set_title(f"{concurrency} request thread{'s' if concurrency != 1 else ''}")
        ax.set_ylim(0, max(cpu, default=1) * 1.3)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)
