"""Every Python code block of README.rst and docs/**/*.rst runs as written.

A reader follows a page from top to bottom, so the ``.. code-block:: python``
blocks of one file run in order in one namespace, in a fresh interpreter
(its own Flask apps, strawberry types, Django settings) with the repository
on ``PYTHONPATH`` and an empty temporary directory as the working directory.
A block fails the test if it raises (its own ``assert``\\ s included).

An RST comment right before a block (invisible in the rendered page) may
name what the block needs but does not show:

- ``.. snippet: stubs=NAME[,NAME...]`` runs the stubs ``NAME`` of
  ``tests/doc_stubs.py`` first (e.g. Django models the block uses);
- ``.. snippet: requires=MODULE[,MODULE...]`` runs the block only where those
  modules are installed (strawberry needs Python 3.10; the suite runs on
  3.9 too);
- ``.. snippet: skip REASON`` does not run it (the reason is mandatory), for
  fragments that only make sense inside a project (see
  ``tests/test_docs_django_project.py``, which builds one from the Django
  page).

``::`` literal blocks and other languages (``text``, ``console``) are not run.

A stub that starts a server (``redis_server``) needs its binary: where it is
missing, the page's other blocks still run, and the test is then skipped
naming the missing binary and the blocks not run (failed under
``DATALOADER_SYNC_REQUIRE_REDIS=1``, as every Redis test; see
``tests/redis_server.py``).
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
from typing import Callable, NamedTuple, Optional

import pytest
import redis_server

ROOT = pathlib.Path(__file__).resolve().parent.parent
STUBS = pathlib.Path(__file__).resolve().parent / "doc_stubs.py"

#: The stubs that start a server: the function saying why its binary is missing here (or None), and
#: the one that skips the test for that reason (or fails it, where CI requires the server).
SERVER_STUBS: dict[str, tuple[Callable[[], Optional[str]], Callable[[str], object]]] = {
    "redis_server": (redis_server.redis_missing, redis_server.skip_or_fail),
}

_DIRECTIVE = re.compile(r"^\.\. code-block::\s*(\S+)\s*$")
_SNIPPET = re.compile(
    r"^\.\. snippet:\s*(stubs=(?P<stubs>\S+)|requires=(?P<requires>\S+)|skip\s+(?P<reason>\S.*))\s*$")


class Block(NamedTuple):
    line: int  # 1-based line of the directive
    code: str
    stubs: list[str]
    skip: Optional[str]
    caption: Optional[str]
    requires: list[str]  # the directive's :caption: (a file name, on the Django page)


def doc_files() -> list[pathlib.Path]:
    """README.rst and every page under docs/ (discovered, so new pages are covered)."""
    files = [ROOT / "README.rst"]
    docs = ROOT / "docs"
    if docs.is_dir():
        files += sorted(docs.rglob("*.rst"))
    return [f for f in files if f.is_file()]


def python_blocks(text: str) -> list[Block]:
    """The ``.. code-block:: python`` blocks of an RST text, with the snippet comment before each."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _DIRECTIVE.match(lines[i])
        if not match or match.group(1) not in ("python", "python3", "py"):
            i += 1
            continue
        stubs: list[str] = []
        requires: list[str] = []
        skip: Optional[str] = None
        j = i - 1
        while j >= 0:  # the snippet comments (and blank lines) right above the directive
            comment = _SNIPPET.match(lines[j])
            if comment:
                if comment.group("stubs"):
                    stubs += comment.group("stubs").split(",")
                elif comment.group("requires"):
                    requires += comment.group("requires").split(",")
                else:
                    skip = comment.group("reason")
            elif lines[j].strip():
                break
            j -= 1
        caption: Optional[str] = None
        k = i + 1
        while k < len(lines) and lines[k].startswith(" ") and lines[k].strip().startswith(":"):
            option = lines[k].strip()
            if option.startswith(":caption:"):
                caption = option[len(":caption:"):].strip()
            k += 1  # the directive's options
        body: list[str] = []
        while k < len(lines) and (not lines[k].strip() or lines[k].startswith((" ", "\t"))):
            body.append(lines[k])
            k += 1
        blocks.append(Block(i + 1, textwrap.dedent("\n".join(body)).strip("\n") + "\n", stubs, skip, caption, requires))
        i = k
    return blocks


_RUNNER = r'''
import json, sys, traceback
blocks = json.loads(sys.stdin.read())
stubs_source = open(sys.argv[1]).read()
stubs = {"__file__": sys.argv[1], "__name__": "doc_stubs"}
exec(compile(stubs_source, sys.argv[1], "exec"), stubs)
namespace = {"__name__": "__main__"}
for block in blocks:
    for name in block["stubs"]:
        stubs["STUBS"][name](namespace)
    try:
        exec(compile(block["code"], f"{sys.argv[2]}:{block['line']}", "exec"), namespace)
    except BaseException:
        print(f"--- block at {sys.argv[2]}:{block['line']} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
'''


def _cases() -> list[object]:
    cases = []
    for path in doc_files():
        blocks = python_blocks(path.read_text(encoding="utf-8"))
        if blocks:
            cases.append(pytest.param(path, id=str(path.relative_to(ROOT))))
    return cases


def test_the_block_reader_sees_blocks_comments_and_options() -> None:
    text = textwrap.dedent("""\
        Intro::

            not = python

        .. snippet: stubs=django_books
        .. snippet: requires=strawberry,flask

        .. code-block:: python
           :caption: books/loaders.py

            x = 1
            if x:
                y = 2

        .. snippet: skip a fragment of settings.py
        .. code-block:: python

            INSTALLED_APPS += ["x"]

        .. code-block:: text

            not python either
        """)
    blocks = python_blocks(text)
    assert [(b.code, b.stubs, b.skip, b.caption, b.requires) for b in blocks] == [
        ("x = 1\nif x:\n    y = 2\n", ["django_books"], None, "books/loaders.py", ["strawberry", "flask"]),
        ('INSTALLED_APPS += ["x"]\n', [], "a fragment of settings.py", None, []),
    ]


def test_every_documentation_page_with_python_is_covered() -> None:
    covered = {case.values[0] for case in _cases()}  # type: ignore[attr-defined]
    assert ROOT / "README.rst" in covered
    for path in doc_files():
        if python_blocks(path.read_text(encoding="utf-8")):
            assert path in covered


@pytest.mark.timeout(300)  # a fresh interpreter importing graphene, Django, strawberry per page
@pytest.mark.parametrize("path", _cases())
def test_the_python_blocks_of_a_page_run_as_written(path: pathlib.Path, tmp_path: pathlib.Path) -> None:
    blocks = [b._asdict() for b in python_blocks(path.read_text(encoding="utf-8"))
              if b.skip is None and all(importlib.util.find_spec(m) is not None for m in b.requires)]
    missing: dict[str, Callable[[str], object]] = {}  # why a block's server cannot start -> how to skip for it
    not_run: list[int] = []  # those blocks' lines
    for block in blocks:
        for why_missing, skip_or_fail in [SERVER_STUBS[s] for s in block["stubs"] if s in SERVER_STUBS]:
            reason = why_missing()
            if reason is not None:
                missing[reason] = skip_or_fail
                not_run.append(block["line"])
    blocks = [b for b in blocks if b["line"] not in not_run]
    env: dict[str, str] = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(STUBS),
         str(path.relative_to(ROOT))],
        input=json.dumps(blocks), capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env,
        check=False,
    )
    why = f"{'; '.join(missing)}: the blocks at {path.relative_to(ROOT)}:{', '.join(map(str, not_run))} were not run"
    assert out.returncode == 0, out.stderr[-4000:] + (f"\n({why})" if missing else "")
    if missing:
        next(iter(missing.values()))(f"{why} (the page's other blocks passed)")


#: Pages whose every block also runs on its own, in a fresh interpreter: a reader copies any one of them.
STANDALONE_PAGES = ("docs/asgi.rst",)


def _standalone_cases() -> list[object]:
    cases = []
    for page in STANDALONE_PAGES:
        for block in python_blocks((ROOT / page).read_text(encoding="utf-8")):
            if block.skip is None:
                cases.append(pytest.param(page, block, id=f"{page}:{block.line}"))
    return cases


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("page", "block"), _standalone_cases())
def test_each_block_of_a_standalone_page_runs_alone(page: str, block: Block, tmp_path: pathlib.Path) -> None:
    missing = [m for m in block.requires if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    env: dict[str, str] = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run([sys.executable, "-c", _RUNNER, str(STUBS), page], input=json.dumps([block._asdict()]),
                         capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
