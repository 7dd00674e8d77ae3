"""Before/after: tools/bench.py run alternately against two checkouts, medians side by side.

On a shared machine single runs of the bench move by ±20–30 %; what carries
over is a ratio measured in one sitting.  This tool runs the *same*
``tools/bench.py`` command (every argument after ``--`` is passed through,
``--micro`` and ``--gc-freeze`` included) against checkout A, then B, then A
… for ``--rounds`` rounds, each run in a fresh process whose
``dataloader_sync`` is that checkout's (its directory first on
``sys.path``, an editable install's finder set aside, the import checked;
its own ``.venv/bin/python`` when it has one, else this interpreter), and
prints for every figure the bench wrote to its JSON: A's median, B's median,
their spread (min–max over the rounds) and B / A.

    python tools/bench_ab.py --a ../main --b . -- --io-ms 0 --concurrency 1 --requests 60 \\
        --variants floor floor-ours single-tick
    python tools/bench_ab.py --a ../main --b . --rounds 5 --only 'micro' -- --micro
    python tools/bench_ab.py --a ../main --b . --json ab.json -- --io-ms 0 --concurrency 48

The bench script itself is the one beside this file by default, so both sides
are measured by the same code (``--own-bench`` runs each checkout's own
``tools/bench.py`` instead, for a checkout whose bench cannot import the
other's package).  Each run prints which ``dataloader_sync`` it imported.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))


def flatten(obj: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a bench report, by a readable path: rows of lists are named by their ``variant``,
    ``target``, ``policy`` or ``name`` field (``variants.single-tick.process_cpu_ms_per_request``)."""
    out: dict[str, float] = {}
    if isinstance(obj, bool) or obj is None:
        return out
    if isinstance(obj, (int, float)):
        out[prefix] = float(obj)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            name = str(i)
            if isinstance(value, dict):
                label = next((value[k] for k in ("variant", "target", "policy", "name") if k in value), None)
                if label is not None:
                    name = str(label) + "".join(f"/{k}={value[k]}" for k in ("heavy",) if k in value)
            out.update(flatten(value, f"{prefix}.{name}" if prefix else name))
    return out


# Figures that are settings or the machine's state, not measurements.
_NOT_FIGURES = re.compile(r"^(settings|environment)\.")


# What each run executes: *checkout* first on sys.path, and no editable-install finder (setuptools puts one on
# sys.meta_path, ahead of sys.path, for the checkout the venv was installed from); it refuses to run when
# dataloader_sync would still come from elsewhere, then runs the bench as ``python bench.py ARGS`` would.
BOOT = """
import os, runpy, sys
checkout, bench = sys.argv[1], sys.argv[2]
sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
sys.path.insert(0, checkout)
import dataloader_sync
where = os.path.abspath(dataloader_sync.__file__)
if not where.startswith(os.path.join(checkout, "")):
    raise SystemExit(f"dataloader_sync comes from {where}, not from {checkout}")
if bench == "-":
    print(where)
else:
    sys.argv = [bench] + sys.argv[3:]
    runpy.run_path(bench, run_name="__main__")
"""


def python_of(checkout: str, given: Optional[str]) -> str:
    if given:
        return given
    venv = os.path.join(checkout, ".venv", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def run_once(label: str, checkout: str, python: str, bench: str, bench_args: list[str], verbose: bool) -> dict:
    """One bench run in a fresh process against *checkout*; its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        proc = subprocess.run([python, "-c", BOOT, checkout, bench, *bench_args, "--json", out],
                              capture_output=True, text=True)
        if verbose or proc.returncode:
            sys.stdout.write(proc.stdout)
            sys.stderr.write(proc.stderr)
        if proc.returncode:
            raise SystemExit(f"bench run for {label} ({checkout}) failed with exit status {proc.returncode}")
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def imported_from(checkout: str, python: str) -> str:
    proc = subprocess.run([python, "-c", BOOT, checkout, "-"], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stderr.strip() or f"{python} cannot import dataloader_sync from {checkout}")
    return proc.stdout.strip()


def summarize(runs_a: list[dict[str, float]], runs_b: list[dict[str, float]], only: Optional[str]) -> list[tuple]:
    names = [n for n in runs_a[0] if n in runs_b[0] and not _NOT_FIGURES.match(n)]
    if only:
        names = [n for n in names if re.search(only, n)]
    rows = []
    for name in names:
        a = [r[name] for r in runs_a if name in r]
        b = [r[name] for r in runs_b if name in r]
        ma, mb = statistics.median(a), statistics.median(b)
        rows.append((name, ma, min(a), max(a), mb, min(b), max(b), mb / ma if ma else None))
    return rows


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def print_rows(rows: list[tuple], rounds: int) -> None:
    head = ("figure", f"A median (min–max of {rounds})", f"B median (min–max of {rounds})", "B / A")
    cells = [head] + [(n, f"{_num(ma)} ({_num(la)}–{_num(ha)})", f"{_num(mb)} ({_num(lb)}–{_num(hb)})",
                       "-" if r is None else f"{r:.3f}") for n, ma, la, ha, mb, lb, hb, r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    for c in cells:
        print("| " + " | ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(c, widths)))
              + " |")


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    bench_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="arguments after -- go to tools/bench.py unchanged")
    p.add_argument("--a", required=True, metavar="DIR", help="checkout A (the 'before')")
    p.add_argument("--b", required=True, metavar="DIR", help="checkout B (the 'after')")
    p.add_argument("--rounds", type=int, default=3, help="runs per side, alternating A B A B … (default 3)")
    p.add_argument("--python-a", metavar="PY", help="interpreter for A (default: A/.venv/bin/python, else this one)")
    p.add_argument("--python-b", metavar="PY", help="interpreter for B (default: B/.venv/bin/python, else this one)")
    p.add_argument("--own-bench", action="store_true", help="run each checkout's own tools/bench.py")
    p.add_argument("--only", metavar="REGEX", help="print only the figures whose path matches")
    p.add_argument("--json", metavar="PATH", help="also write every run's figures and the medians as JSON")
    p.add_argument("--verbose", action="store_true", help="show every bench run's own output")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    if "--json" in bench_args:
        p.error("--json goes before --: this tool passes its own --json to every bench run")
    sides = []
    for label, checkout, py in (("A", args.a, args.python_a), ("B", args.b, args.python_b)):
        checkout = os.path.abspath(checkout)
        if not os.path.isdir(os.path.join(checkout, "dataloader_sync")):
            p.error(f"--{label.lower()} {checkout} is not a checkout (no dataloader_sync/ in it)")
        python = python_of(checkout, py)
        bench = os.path.join(checkout if args.own_bench else os.path.dirname(HERE), "tools", "bench.py")
        sides.append((label, checkout, python, bench))
        print(f"{label}: {checkout} (dataloader_sync from {imported_from(checkout, python)}; {python}; {bench})")
    print(f"bench arguments: {' '.join(bench_args) or '(none)'}; {args.rounds} rounds, A B alternating", flush=True)
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for i in range(args.rounds):
        for label, checkout, python, bench in sides:
            runs[label].append(flatten(run_once(label, checkout, python, bench, bench_args, args.verbose)))
            print(f"  round {i + 1}: {label} done", flush=True)
    rows = summarize(runs["A"], runs["B"], args.only)
    print()
    print_rows(rows, args.rounds)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"a": args.a, "b": args.b, "bench_args": bench_args, "runs": runs,
                       "medians": {n: {"a": ma, "b": mb, "b_over_a": r} for n, ma, _, _, mb, _, _, r in rows}},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
