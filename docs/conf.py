"""Sphinx configuration for the dataloader_sync documentation.

Build: ``python -m sphinx -W --keep-going -b html docs /tmp/docs-html``
(from the repository root; CI builds with warnings as errors).
"""
from __future__ import annotations

import os
import sys

# Document the package of this checkout, installed or not.
sys.path.insert(0, os.path.abspath(".."))

project = "dataloader_sync"
author = "dataloader_sync contributors"
copyright = "dataloader_sync contributors"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Args: / Returns: / Raises: sections
    "sphinx.ext.viewcode",
]

html_theme = "furo"
html_title = "dataloader_sync"

# `name` in a page or a docstring links to the API reference when it can.
default_role = "py:obj"

autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Attributes:" as fields of the class, not as second descriptions of the
# attributes autodoc documents anyway (NamedTuples, dataclasses).
napoleon_use_ivar = True

exclude_patterns = ["_build"]
