"""The package metadata: one version, a summary and classifiers that say what it is for."""
from __future__ import annotations

import configparser
import importlib.metadata
import os
import pathlib
import re

import pytest

import dataloader_sync

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def metadata() -> configparser.SectionProxy:
    config = configparser.ConfigParser(interpolation=None)
    config.read(os.path.join(ROOT, "setup.cfg"))
    return config["metadata"]


def test_the_version_has_one_source_dataloader_sync___version__() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?", dataloader_sync.__version__)
    assert metadata()["version"] == "attr: dataloader_sync.__version__"
    try:
        installed = importlib.metadata.version("dataloader_sync")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("dataloader_sync is not installed here (run from the checkout)")
    assert installed == dataloader_sync.__version__


def test_the_summary_keywords_and_classifiers_say_what_it_is_for() -> None:
    meta = metadata()
    for word in ("GraphQL", "Django", "Flask", "sync"):
        assert word in meta["description"]
    keywords = [k.strip() for k in meta["keywords"].split(",")]
    assert {"dataloader", "graphql", "django", "flask"} <= set(keywords)
    classifiers = meta["classifiers"]
    for classifier in ("Framework :: Django", "Framework :: Flask", "Typing :: Typed",
                       "Programming Language :: Python :: 3.9", "Programming Language :: Python :: 3.13"):
        assert classifier in classifiers
    assert meta["license_expression"] == "MIT"
    assert "license" not in meta  # the SPDX expression replaces the old License field


def test_the_readme_links_work_on_the_package_index() -> None:
    """README.rst is the package index's page: a relative link (``docs/x.rst``) is broken there."""
    import re

    readme = pathlib.Path(ROOT, "README.rst").read_text(encoding="utf-8")
    targets = re.findall(r"`[^`<]*<([^>]+)>`_", readme) + re.findall(r"^\.\. _[^:]+:\s*(\S+)", readme, re.M)
    assert [t for t in targets if not t.startswith(("https://", "http://"))] == []
    assert len(readme.splitlines()) <= 200  # the first five minutes; the rest is in docs/
