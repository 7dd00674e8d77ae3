"""Each extra, installed alone from the built wheel in a fresh venv, runs what its pages promise.

The wheel (and the sdist) are built from this checkout; for each extra a new
virtual environment gets ``dataloader_sync[extra]`` from that wheel and
nothing else, and runs, outside the checkout (the package comes from the
wheel), the first example of each docs page whose first install line names
that extra, every example of each page whose install line names every extra
its examples need (in order, in one interpreter, as the snippet test runs
them, but with no ``requires=`` skipping: a block needing what the extras do
not bring fails), and the getting-started app of its stack, as the page
writes them. So an extra that does not bring what its page imports fails here.

Slow (a venv and an install per extra): it runs only when
``DATALOADER_SYNC_EXTRAS=1`` is set, as ``.ci/extras`` does (a CI leg of its
own, beside the main suite); needs ``build`` (``pip install build``).
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tarfile
import venv
from typing import Any

import pytest
from test_docs_getting_started import run_app
from test_docs_snippets import _RUNNER, ROOT, STUBS, python_blocks

if os.environ.get("DATALOADER_SYNC_EXTRAS") != "1":
    pytest.skip("the extras leg: DATALOADER_SYNC_EXTRAS=1 (see .ci/extras)", allow_module_level=True)

pytestmark = pytest.mark.timeout(900)

#: (the extras installed, the pages whose first example runs, the pages all of whose examples run,
#: the getting-started apps that run)
CASES = [
    ("graphene", ["docs/graphql.rst"], [], []),
    ("flask,graphene", [], ["docs/flask.rst", "README.rst"], []),
    # sqlalchemy.rst's first install line is its app's; its graphene-sqlalchemy section's line is the whole page's
    ("flask-sqlalchemy,graphene", ["docs/sqlalchemy.rst"], [], []),
    ("flask-sqlalchemy,graphene-sqlalchemy", [], ["docs/sqlalchemy.rst"], ["Flask, SQLAlchemy and graphene"]),
    # django.rst's first example is a project's files: the getting-started app is that project, whole
    ("graphene-django", [], [], ["Django and graphene-django"]),
    ("strawberry,flask-sqlalchemy", [], [], ["strawberry"]),
    ("ariadne,sqlalchemy", [], [], ["Ariadne"]),
    ("ariadne,sqlalchemy,flask", [], ["docs/ariadne.rst"], []),  # the install line of ariadne.rst's examples
    ("rest-framework", [], ["docs/rest-framework.rst"], []),  # its examples use Django's own auth models
]

STRAWBERRY_DJANGO_CHECK = """
import django
from django.conf import settings
settings.configure(INSTALLED_APPS=["strawberry_django"], DATABASES={})
django.setup()
import dataloader_sync.strawberry_django, graphql
assert graphql.version_info >= (3, 3), graphql.version
print("ok")
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], check=True,
                   capture_output=True, timeout=600)
    return out


def wheel_of(dist: pathlib.Path) -> pathlib.Path:
    (wheel,) = dist.glob("dataloader_sync-*.whl")
    return wheel


def make_venv(directory: pathlib.Path, requirement: str) -> str:
    venv.create(directory, with_pip=True)
    python = str(directory / "bin" / "python")
    done = subprocess.run([python, "-m", "pip", "install", "-q", requirement], capture_output=True, text=True,
                          timeout=600, check=False, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    return python


def clean_env() -> dict[str, Any]:
    """The environment without the checkout: the package must come from the wheel."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}


def first_example(page: str) -> str:
    blocks = [b for b in python_blocks((ROOT / page).read_text(encoding="utf-8")) if b.skip is None]
    assert blocks and not blocks[0].stubs, page
    return blocks[0].code


def test_the_sdist_ships_no_test_tree_it_could_not_run(dist: pathlib.Path) -> None:
    (sdist,) = dist.glob("dataloader_sync-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    assert not [n for n in names if "/tests/" in n], names
    assert any(n.endswith("/dataloader_sync/__init__.py") for n in names)


def every_example(page: str) -> str:
    """The page's blocks (but the ``skip`` ones), as the snippet test's runner reads them (JSON)."""
    blocks = [b._asdict() for b in python_blocks((ROOT / page).read_text(encoding="utf-8")) if b.skip is None]
    assert blocks, page
    return json.dumps(blocks)


@pytest.mark.parametrize("extras, pages, whole_pages, apps", CASES, ids=[case[0] for case in CASES])
def test_an_extra_alone_runs_its_pages_examples_and_its_app(
        extras: str, pages: list[str], whole_pages: list[str], apps: list[str], dist: pathlib.Path,
        tmp_path: pathlib.Path) -> None:
    python = make_venv(tmp_path / "venv", f"{wheel_of(dist)}[{extras}]")
    env = clean_env()
    where = subprocess.run([python, "-c", "import dataloader_sync; print(dataloader_sync.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True, timeout=60)
    assert str(tmp_path / "venv") in where.stdout, where.stdout  # the wheel's, not the checkout's
    for page in pages:
        run_dir = tmp_path / pathlib.Path(page).stem
        run_dir.mkdir()
        out = subprocess.run([python, "-c", first_example(page)], capture_output=True, text=True, env=env,
                             cwd=run_dir, timeout=240, check=False)
        assert out.returncode == 0, (page, out.stderr[-4000:])
    for page in whole_pages:
        run_dir = tmp_path / f"{pathlib.Path(page).stem}-whole"
        run_dir.mkdir()
        out = subprocess.run([python, "-c", _RUNNER, str(STUBS), page], input=every_example(page),
                             capture_output=True, text=True, env=env, cwd=run_dir, timeout=240, check=False)
        assert out.returncode == 0, (page, out.stderr[-4000:])
    for title in apps:
        app_dir = tmp_path / "app"
        app_dir.mkdir(exist_ok=True)
        run_app(title, app_dir, python, env)


def test_the_strawberry_django_extra_brings_strawberry_django_on_graphql_core_3_3(tmp_path: pathlib.Path,
                                                                                  dist: pathlib.Path) -> None:
    python = make_venv(tmp_path / "venv", f"{wheel_of(dist)}[strawberry-django]")
    out = subprocess.run([python, "-c", STRAWBERRY_DJANGO_CHECK], capture_output=True, text=True,
                         env=clean_env(), cwd=tmp_path, timeout=120, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-4000:]
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    run_app("strawberry-django", app_dir, python, clean_env())
