"""The Django page of the docs, followed literally on a fresh ``django-admin startproject``.

``startproject mysite`` and ``startapp books`` make the project as Django
does; the page's blocks are written where their captions say
(``mysite/settings.py`` is appended to, the others replace the file); the
stub the page names (models like the example project's) is the only thing
not from the page: ``books/models.py`` and its migrations are copied from
``examples/django_project``.  Then, in the project's own interpreter with
its own settings, Django's test client checks what a new user would try
first: POST gets the data (not 403), GraphiQL renders (not 500), and
``{ authors { books { reviews { rating } } } }`` costs three SQL queries
(the page's schema writes no relation resolver: auto relations batch them).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
import importlib.util

if importlib.util.find_spec("graphene_django") is None:
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from test_docs_snippets import ROOT, python_blocks

PAGE = ROOT / "docs" / "django.rst"
EXAMPLE_APP = ROOT / "examples" / "django_project" / "books"

CHECK = r'''
import json
import django
django.setup()
from django.test.utils import setup_test_environment
setup_test_environment()  # as manage.py test does: the test client's host is allowed
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

client = Client(enforce_csrf_checks=True)  # as curl or a script: no CSRF token
query = "{ authors { books { reviews { rating } } } }"
with CaptureQueriesContext(connection) as queries:
    response = client.post("/graphql", {"query": query}, content_type="application/json")
assert response.status_code == 200, (response.status_code, response.content[:500])
body = response.json()
assert "errors" not in body, body
authors = body["data"]["authors"]
assert len(authors) >= 2 and all(a["books"] for a in authors), authors
assert any(book["reviews"] for a in authors for book in a["books"]), authors
assert len(queries.captured_queries) == 3, [q["sql"] for q in queries.captured_queries]

page = client.get("/graphql", HTTP_ACCEPT="text/html")
assert page.status_code == 200, (page.status_code, page.content[:500])
assert b"graphiql" in page.content.lower()
print("ok")
'''


@pytest.mark.timeout(300)  # three Django interpreters
def test_the_django_page_followed_literally_on_a_fresh_startproject(tmp_path: pathlib.Path) -> None:
    blocks = {b.caption: b.code for b in python_blocks(PAGE.read_text(encoding="utf-8")) if b.caption}
    assert set(blocks) == {"mysite/settings.py", "books/loaders.py", "books/schema.py", "mysite/urls.py"}

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("DJANGO_SETTINGS_MODULE", None)

    def django_admin(*args: str, cwd: pathlib.Path) -> None:
        subprocess.run([sys.executable, "-m", "django", *args], cwd=cwd, env=env, check=True, timeout=120,
                       capture_output=True)

    django_admin("startproject", "mysite", str(tmp_path), cwd=tmp_path)
    django_admin("startapp", "books", cwd=tmp_path)
    # The stub the page names: the example's models and their migrations (sample data included).
    shutil.copy(EXAMPLE_APP / "models.py", tmp_path / "books" / "models.py")
    shutil.rmtree(tmp_path / "books" / "migrations")
    shutil.copytree(EXAMPLE_APP / "migrations", tmp_path / "books" / "migrations",
                    ignore=shutil.ignore_patterns("__pycache__"))

    settings = tmp_path / "mysite" / "settings.py"
    settings.write_text(settings.read_text() + "\n" + blocks["mysite/settings.py"])
    settings.write_text(settings.read_text().replace(  # the test's database: in memory
        "\"NAME\": BASE_DIR / \"db.sqlite3\"", "\"NAME\": \":memory:\"").replace(
        "'NAME': BASE_DIR / 'db.sqlite3'", "'NAME': ':memory:'"))
    for name in ("books/loaders.py", "books/schema.py", "mysite/urls.py"):
        (tmp_path / name).write_text(blocks[name])

    env["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
    out = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-4000:]
