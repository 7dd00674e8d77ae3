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

The Django section's two SQL logs (the query with ``DATALOADER_SYNC_AUTO_RELATIONS``
``False``, then ``True``) are the statements that app's run logs, word for word.
"""
from __future__ import annotations

import importlib.util
import json
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


#: Run in the Django app's directory: the SQL of the page's query, as CaptureQueriesContext logs it,
#: under settings that are the app's with the switch set from the environment.
SQL_LOG_SETTINGS = """
import os
from mysite.settings import *
DATALOADER_SYNC_AUTO_RELATIONS = os.environ["AUTO_RELATIONS"] == "1"
"""
SQL_LOG = """
import json
import django
django.setup()
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
with CaptureQueriesContext(connection) as queries:
    response = Client(HTTP_HOST="localhost").post(
        "/graphql", {"query": "{ authors { name books { title } } }"}, content_type="application/json")
assert "errors" not in response.json() and len(response.json()["data"]["authors"]) == 3, response.json()
print(json.dumps([query["sql"] for query in queries.captured_queries]))
"""


def sql_blocks(text: str) -> list[tuple[str, list[str]]]:
    """The ``.. code-block:: sql`` blocks of *text*: (caption, the statements, whitespace collapsed)."""
    found = []
    for block in re.finditer(r"^\.\. code-block:: sql\n   :caption: (.*)\n\n((?:(?: {4}.*)?\n)+)", text, re.M):
        statements = [" ".join(s.split()) for s in block.group(2).split(";")]
        found.append((block.group(1), [s for s in statements if s]))
    return found


@pytest.mark.timeout(300)
def test_the_django_apps_sql_log_without_and_with_the_switch_is_the_pages(tmp_path: pathlib.Path) -> None:
    """The page's picture of "one batch per loader per level": the app's own statements, from a real run."""
    title = "Django and graphene-django"
    if any(importlib.util.find_spec(m) is None for m in NEEDS[title]):
        pytest.skip(f"needs {', '.join(NEEDS[title])}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    run_app(title, tmp_path, sys.executable, env)  # the project, migrated, with the page's three authors
    (tmp_path / "sql_log_settings.py").write_text(SQL_LOG_SETTINGS, encoding="utf-8")
    logs = []
    for switch in ("0", "1"):
        out = subprocess.run([sys.executable, "-c", SQL_LOG], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, check=False,
                             env={**env, "DJANGO_SETTINGS_MODULE": "sql_log_settings", "AUTO_RELATIONS": switch})
        assert out.returncode == 0, out.stderr[-4000:]
        logs.append([" ".join(sql.split()) for sql in json.loads(out.stdout)])
    shown = sql_blocks(sections(PAGE.read_text(encoding="utf-8"))[title])
    assert [statements for _, statements in shown] == logs
    assert [caption.split(":")[0] for caption, _ in shown] == [
        "DATALOADER_SYNC_AUTO_RELATIONS = False", "DATALOADER_SYNC_AUTO_RELATIONS = True"]
    assert [len(log) for log in logs] == [4, 2]  # 1 + one per author, and one per level


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
