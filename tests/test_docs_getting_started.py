"""The getting-started page, followed literally: each stack's app built and run as the page says.

For each section of docs/getting-started.rst that has files (python blocks
with a ``:caption:``), a fresh directory gets those files (``*/settings.py``
is appended to, the others are written whole) and the section's console
commands run in order, as a reader would type them: ``pip install`` lines
are left out (this interpreter has the packages), ``django-admin`` and
``python`` are this interpreter.  The lines the page shows under a command
are what it must print.  So the Django project is made by Django's own
``startproject``/``startapp``/``makemigrations``/``migrate``, and the
statement count each section claims is the one its app prints.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import shlex
import subprocess
import sys
from typing import NamedTuple

import pytest
from test_docs_snippets import ROOT, python_blocks

PAGE = ROOT / "docs" / "getting-started.rst"

#: What each section's app needs installed (the test extra has them all but strawberry-django;
#: .ci/extras installs each extra alone).
NEEDS = {
    "Django and graphene-django": ["django", "graphene_django"],
    "Flask, SQLAlchemy and graphene": ["flask_sqlalchemy", "graphene_sqlalchemy"],
    "strawberry": ["flask_sqlalchemy", "strawberry"],
    "strawberry-django": ["django", "strawberry_django"],
    "Ariadne": ["ariadne", "sqlalchemy", "werkzeug"],
}

#: Why an app may be missing what it needs here, where that is expected.
ELSEWHERE = {
    "strawberry-django": "strawberry-django needs graphql-core 3.3 (graphene, in this venv, needs 3.2): "
                         ".ci/strawberry-django runs this app",
}


class Command(NamedTuple):
    argv: list[str]
    output: list[str]  # the lines the page shows under it


def sections(text: str) -> dict[str, str]:
    """The page's sections by title (a line underlined with ``=``)."""
    lines = text.splitlines()
    found: dict[str, list[str]] = {}
    current = ""
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and re.fullmatch(r"=+", lines[i + 1]) and line.strip() and len(lines[i + 1]) >= len(line):
            if i > 0 and re.fullmatch(r"=+", lines[i - 1]):
                continue  # the page title, overlined
            current = line.strip()
            found[current] = []
        elif current:
            found[current].append(line)
    return {title: "\n".join(body) for title, body in found.items()}


def commands(text: str) -> list[Command]:
    """The ``$ ...`` lines of the ``console`` blocks, with the output lines under each."""
    found: list[Command] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != ".. code-block:: console":
            i += 1
            continue
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            line = lines[i].strip()
            if line.startswith("$ "):
                found.append(Command(shlex.split(line[2:]), []))
            elif line and found:
                found[-1].output.append(line)
            i += 1
    return found


APPS = [title for title in sections(PAGE.read_text(encoding="utf-8"))
        if any(b.caption for b in python_blocks(sections(PAGE.read_text(encoding="utf-8"))[title]))]


def test_the_page_has_an_app_per_stack() -> None:
    assert APPS == list(NEEDS)


def test_the_readme_django_lines_are_the_tested_apps() -> None:
    """README.rst's Django quick start is not runnable alone (a project's files): each of its code
    lines is one of the graphene-django app's, which the next test runs."""
    readme = (ROOT / "README.rst").read_text(encoding="utf-8")
    (block,) = [b for b in python_blocks(readme) if "DATALOADER_SYNC_AUTO_RELATIONS" in b.code]
    app = sections(PAGE.read_text(encoding="utf-8"))["Django and graphene-django"]
    app_lines = {line.strip() for b in python_blocks(app) for line in b.code.splitlines()}
    code = [line.strip() for line in block.code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "DATALOADER_SYNC_AUTO_RELATIONS = True      # relation fields batched, no resolver written" in code
    assert [line for line in code if line not in app_lines] == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize("title", APPS)
def test_a_getting_started_app_runs_as_written(title: str, tmp_path: pathlib.Path) -> None:
    missing = [m for m in NEEDS[title] if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(ELSEWHERE.get(title, f"needs {', '.join(missing)}"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    run_app(title, tmp_path, sys.executable, env)


def run_app(title: str, directory: pathlib.Path, python: str, env: dict[str, str]) -> None:
    """Build and run the app of section *title* in *directory* with the interpreter *python*.

    Also used by tests/test_extras.py, with the interpreter of a venv that has only an extra installed.
    """
    text = sections(PAGE.read_text(encoding="utf-8"))[title]
    files = [(b.caption, b.code) for b in python_blocks(text) if b.caption]
    env = {k: v for k, v in env.items() if k != "DJANGO_SETTINGS_MODULE"}
    written = False
    for command in commands(text):
        argv = command.argv
        if argv[:2] == ["pip", "install"]:
            continue
        if argv[0] == "django-admin":
            argv = [python, "-m", "django", *argv[1:]]
        elif argv[0] == "python":
            argv = [python, *argv[1:]]
        if not written and argv[1:2] != ["-m"] and "startapp" not in argv:
            write_files(directory, files)  # after the commands that make the project, before the rest
            written = True
        out = subprocess.run(argv, cwd=directory, env=env, capture_output=True, text=True, timeout=240, check=False)
        assert out.returncode == 0, (argv, out.stdout[-2000:], out.stderr[-4000:])
        printed = [line.strip() for line in out.stdout.splitlines() if line.strip()]
        for line in command.output:
            assert line in printed, (argv, line, printed)
    assert written and any(c.output for c in commands(text))


def write_files(root: pathlib.Path, files: list[tuple[str, str]]) -> None:
    for caption, code in files:
        target = root / caption
        target.parent.mkdir(parents=True, exist_ok=True)
        if caption.endswith("/settings.py"):
            with target.open("a", encoding="utf-8") as settings:
                settings.write("\n" + code)
        else:
            target.write_text(code, encoding="utf-8")
