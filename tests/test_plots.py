"""tools/repro.py --plot and tools/bench.py --plot draw their tables (where matplotlib is installed).

No figure is judged by its pixels: the tests check that a PNG is written
from a run that succeeded, that a missing matplotlib is reported at once
with how to install it (before anything is measured), and that a path that
is not a PNG is refused.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
needs_matplotlib = pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed (the [plot] extra)")

REPRO_TINY = ("--loaders", "10", "--seconds", "0.05", "--calls", "1", "2")
BENCH_TINY = ("--requests", "6", "--io-ms", "0", "--items", "3", "--depth", "1", "--loaders", "20",
              "--tick-ms", "5", "--variants", "single-tick", "floor", "--plot-concurrency", "1", "2")


def _tool(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, os.path.join(TOOLS, name), *args],
                          capture_output=True, text=True, timeout=120, env=env)


def _is_png(path: pathlib.Path) -> bool:
    return path.is_file() and path.stat().st_size > 1000 and path.read_bytes()[:8] == PNG_SIGNATURE


@needs_matplotlib
def test_repro_plot_writes_a_png_of_the_rows_it_prints(tmp_path: pathlib.Path) -> None:
    figure = tmp_path / "repro.png"
    proc = _tool("repro.py", *REPRO_TINY, "--plot", str(figure))
    assert proc.returncode == 0, proc.stderr
    assert "single-tick" in proc.stdout and f"figure: {figure}" in proc.stdout
    assert _is_png(figure)


@needs_matplotlib
def test_repro_plot_with_json_keeps_stdout_json(tmp_path: pathlib.Path) -> None:
    figure = tmp_path / "repro.png"
    proc = _tool("repro.py", *REPRO_TINY, "--json", "--plot", str(figure))
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 4
    assert _is_png(figure)


@needs_matplotlib
def test_bench_plot_runs_each_concurrency_and_writes_a_png(tmp_path: pathlib.Path) -> None:
    figure, report = tmp_path / "bench.png", tmp_path / "bench.json"
    proc = _tool("bench.py", *BENCH_TINY, "--plot", str(figure), "--json", str(report))
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(report.read_text())["plot"]
    assert [run["concurrency"] for run in runs] == [1, 2]
    assert [run["settings"]["concurrency"] for run in runs] == [1, 2]
    for run in runs:
        assert [row["variant"] for row in run["variants"]] == ["single-tick", "floor"]
        assert all(row["errors"] == 0 for row in run["variants"] if row["status"] == "ran")
    assert _is_png(figure)


@pytest.mark.parametrize("tool, args", [("repro.py", REPRO_TINY), ("bench.py", BENCH_TINY)])
def test_plot_without_matplotlib_says_how_to_install_it_before_measuring(
        tmp_path: pathlib.Path, tool: str, args: tuple[str, ...]) -> None:
    # A matplotlib package that cannot be imported, first on the path: what a
    # machine without it sees.
    (tmp_path / "hidden" / "matplotlib").mkdir(parents=True)
    (tmp_path / "hidden" / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "hidden"), os.environ.get("PYTHONPATH", "")])}
    figure = tmp_path / "figure.png"
    proc = _tool(tool, *args, "--plot", str(figure), env=env)
    assert proc.returncode != 0
    assert "--plot needs matplotlib" in proc.stderr and ".[plot]" in proc.stderr
    assert "single-tick" not in proc.stdout  # nothing was measured
    assert not figure.exists()


@pytest.mark.parametrize("tool, args", [("repro.py", REPRO_TINY), ("bench.py", BENCH_TINY)])
def test_plot_refuses_a_path_that_is_not_a_png(tmp_path: pathlib.Path, tool: str, args: tuple[str, ...]) -> None:
    proc = _tool(tool, *args, "--plot", str(tmp_path / "figure.jpg"))
    assert proc.returncode != 0
    assert "--plot must name a .png file" in proc.stderr


def test_bench_refuses_a_bad_plot_concurrency() -> None:
    proc = _tool("bench.py", "--plot-concurrency", "0", "--plot", "x.png")
    assert proc.returncode != 0
    assert "--plot-concurrency" in proc.stderr
