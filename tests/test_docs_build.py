"""The documentation builds with warnings as errors, as CI builds it.

CI runs ``sphinx -W`` itself (``.ci/run``, after installing the ``docs``
extra); this test runs the same build wherever Sphinx and furo are installed,
so that a docstring that is not valid reStructuredText or a page left out of
the toctree fails the suite before it reaches CI.  Without them it is skipped
(the ``test`` extra does not install them).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("furo")

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)
def test_docs_build_with_warnings_as_errors(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, env=env, timeout=280,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "html" / "api.html").is_file()
