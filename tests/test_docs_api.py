"""docs/api.rst documents every public name of the core and of every integration.

The names come from the sources, without importing them (an integration's
package need not be installed here): each package's ``__all__`` and the
names its ``__dir__`` adds (those imported lazily, such as
``dataloader_sync.django.GraphQLView``).  A new integration package, or a
new name in one, fails this test until its line is in docs/api.rst; the
``docs`` extra must then install what autodoc needs to import it (the
Sphinx build, tests/test_docs_build.py and ``.ci/run``, fails otherwise).
"""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dataloader_sync"
API = (ROOT / "docs" / "api.rst").read_text(encoding="utf-8")


def public_names(init: pathlib.Path) -> list[str]:
    """``__all__`` of a package's ``__init__.py``, and the string constants its ``__dir__`` returns."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    names: list[str] = []
    constants: dict[str, list[str]] = {}  # module-level lists of names, which __dir__ may spread
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = ast.literal_eval(node.value)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names += ast.literal_eval(node.value)
        elif isinstance(node, ast.FunctionDef) and node.name == "__dir__":
            for c in ast.walk(node):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    names.append(c.value)
                elif isinstance(c, ast.Name) and c.id in constants and c.id != "__all__":
                    names += constants[c.id]
    return sorted(set(names))


def packages() -> list[str]:
    found = ["dataloader_sync"]
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        if not init.parent.name.startswith("_"):
            found.append(f"dataloader_sync.{init.parent.name}")
    return found


def test_the_package_list_sees_the_integrations() -> None:
    assert {"dataloader_sync.graphql", "dataloader_sync.django", "dataloader_sync.ariadne"} <= set(packages())
    assert {"GraphQLView", "DjangoDebugExecutionContext"} <= set(public_names(PACKAGE / "django" / "__init__.py"))


@pytest.mark.parametrize("package", packages())
def test_every_public_name_is_in_the_api_page(package: str) -> None:
    init = PACKAGE.joinpath(*package.split(".")[1:], "__init__.py")
    names = public_names(init)
    assert names, f"{package} has no __all__"
    missing = [name for name in names if not re.search(rf"{re.escape(f'{package}.{name}')}\b", API)]
    assert not missing, f"docs/api.rst does not document {', '.join(f'{package}.{n}' for n in missing)}"
