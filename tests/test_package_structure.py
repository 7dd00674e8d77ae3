"""The package's shape, read from its source (``ast``), not imported: what a new maintainer relies on.

- No import cycle between its modules, counting every import (typing-only and
  lazy ones too), nor between its folders (the core and each integration).
  The one table of modules imported by name (auto relations' plugins) is
  pinned as it is.
- Each ``DataLoader`` field is declared in one Protocol at most (the loader's
  friend modules read it through ``_core/_loader_state.LoaderState``).
- No module outside ``_core/`` reads a private attribute of a class defined
  in ``_core/`` (the loader, its futures and the modules around them), and
  ``_core/`` imports nothing from beside it.
- One wall per upstream: no module but ``_core/_compat.py`` (CPython's
  standard library) and ``graphql/_compat.py`` (graphql-core) imports a
  private module or name of theirs or reads ``module._name`` of one; the
  standard ``Future``'s private fields are read outside ``_core/`` only by
  the modules ``HOT_FUTURE_READS`` names, each with its reason.
- Long functions stay few (at most 3 over 60 lines).
- docs/design.rst's module map names every module of the package, and
  nothing that is not one.

Run as a script, it prints how many reads of another module's private
attributes the package makes (``cross_module_private_reads``): a figure to
watch, not asserted here.
"""
from __future__ import annotations

import ast
import concurrent.futures as cf
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dataloader_sync"
CORE = PACKAGE / "_core"
DESIGN = ROOT / "docs" / "design.rst"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (``dataloader_sync.graphql._loop``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules *name* imports, anywhere in it (module level, functions, ``TYPE_CHECKING``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if not (base == "dataloader_sync" or base.startswith("dataloader_sync.")):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    found.discard(name)
    return {m for m in found if m in known}


def modules_named_in_strings() -> dict[str, set[str]]:
    """Modules of the package (not packages: those names are logger names and ``__module__``) that a
    module names in a string constant, to import them at run time, by importer."""
    known = modules()
    found: dict[str, set[str]] = {}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known
                    and known[node.value].name != "__init__.py"):
                found.setdefault(name, set()).add(node.value)
    return found


def import_graph() -> dict[str, set[str]]:
    """The package's modules and what each imports."""
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def folder_of(name: str) -> str:
    """The folder a module lives in: ``dataloader_sync``, ``dataloader_sync._core`` (the two of the core)
    or ``dataloader_sync.graphql`` etc."""
    path = modules()[name]
    return ".".join(path.parent.relative_to(ROOT).parts)


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for name, imported in graph.items():
        mine = folder_of(name)
        folders.setdefault(mine, set()).update(folder_of(m) for m in imported if folder_of(m) != mine)
    return folders


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def dataloader_members() -> set[str]:
    """DataLoader's fields (``self.x = ...`` in its methods) and its methods and properties."""
    cls = _class(ast.parse((CORE / "_dataloader.py").read_text()), "DataLoader")
    members = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    members.add(t.attr)
    return members


def _is_protocol(node: ast.ClassDef) -> bool:
    return any((isinstance(b, ast.Name) and b.id == "Protocol")
               or (isinstance(b, ast.Attribute) and b.attr == "Protocol") for b in node.bases)


def protocols() -> Iterator[tuple[str, ast.ClassDef]]:
    """Every ``Protocol`` class of the package, with its module's path."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and _is_protocol(node):
                yield str(path.relative_to(PACKAGE)), node


def protocol_members(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """``(fields, methods)`` a Protocol declares (annotated names; functions and properties)."""
    fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    methods = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return fields, methods


def loader_field_declarations() -> dict[str, list[str]]:
    """For each DataLoader field, the Protocols describing the loader (all their members are the loader's)
    that declare it."""
    members = dataloader_members()
    out: dict[str, list[str]] = {}
    for where, cls in protocols():
        fields, methods = protocol_members(cls)
        if not fields or not (fields | methods) <= members:
            continue  # not a view of the loader (a future's, a scope's, ...)
        for field in fields:
            out.setdefault(field, []).append(f"{where}:{cls.name}")
    return out


def long_functions(limit: int = 60) -> list[tuple[str, str, int]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    out.append((str(path.relative_to(PACKAGE)), node.name, length))
    return out


def module_map(text: Optional[str] = None) -> set[str]:
    """The modules docs/design.rst's "Module map" section names (``graphql/_loop.py``), relative to the package."""
    text = DESIGN.read_text() if text is None else text
    start = text.index("Module map\n==========")
    rest = text[start + 1:]
    end = re.search(r"\n[^\n]+\n=+\n", rest[len("Module map\n=========="):])
    section = rest if end is None else rest[: len("Module map\n==========") + end.start()]
    return set(re.findall(r"``((?:[a-z_]+/)*[a-z_]+\.py)``", section))


def package_files() -> set[str]:
    return {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")}


#: ``concurrent.futures.Future``'s own fields (``_state``, ``_result``, ``_exception``, ...): ``Future`` is one
#: and inherits them, and graphql/'s execution loop reads a done future's outcome through them as CPython's
#: Future keeps them (``_state`` written last), without a call per load. They are the standard library's, not
#: a ``_core`` class's, so the boundary check leaves them out.
STDLIB_FUTURE_FIELDS = {name for name in vars(cf.Future()) if name.startswith("_") and not name.startswith("__")}


def core_private_names(root: Path = CORE) -> set[str]:
    """The private attributes of the classes defined under *root*: their ``_x`` methods, class attributes and
    ``self._x`` fields (Protocols left out: they describe a class, they define none), less the fields a
    ``_core`` class inherits from ``concurrent.futures.Future`` (``STDLIB_FUTURE_FIELDS``)."""
    names: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef) or _is_protocol(cls):
                continue
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in cls.body:
                    names.add(node.name)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node in cls.body:
                    names.add(node.target.id)
                elif isinstance(node, ast.Assign) and node in cls.body:
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                        and node.value.id in ("self", "cls") and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")} - STDLIB_FUTURE_FIELDS


def reads_across_the_core_boundary(package: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """Reads, by a module outside *package*'s ``_core/``, of a private attribute of a class defined in it."""
    root = package / "_core"
    private = core_private_names(root)
    inside = {str(p.relative_to(package)) for p in root.rglob("*.py")}
    return [(where, line, attr) for where, line, attr in cross_module_private_reads(package)
            if where not in inside and attr in private]


def cross_module_private_reads(package: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """Reads of ``x._name`` where *x* is not ``self``/``cls`` and no class or function of the reading module
    defines ``_name``: another module's private attribute (an estimate, by name)."""
    out = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        own: set[str] = set()
        declared: set[int] = set()
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and _is_protocol(n)]:
            declared.update(id(n) for n in ast.walk(cls))  # a Protocol's names are another class's
        for node in ast.walk(tree):
            if id(node) in declared:
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in ("self", "cls") and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                own.add(node.target.id)
            elif isinstance(node, ast.Assign):
                own.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and node.attr not in own):
                out.append((str(path.relative_to(package)), node.lineno, node.attr))
    return out


# -- the checks ----------------------------------------------------------------------------
def test_no_import_cycle_between_modules() -> None:
    assert cycles(import_graph()) == []


def test_no_import_cycle_between_folders() -> None:
    assert cycles(folder_graph(import_graph())) == []


def test_the_only_modules_imported_by_name_are_the_auto_relations_plugins() -> None:
    """Auto relations find the integration that knows an ORM's instances by the ORM imported
    (``graphql/_auto_relations._INTEGRATIONS``): a table of plugins named in strings, which call
    their host back (``join_paths``).  A host and its plugins, not layers: left out of the cycle
    checks on purpose, and pinned here so that no other arrow hides in a string."""
    assert modules_named_in_strings() == {
        "dataloader_sync.graphql._auto_relations": {"dataloader_sync.django._auto", "dataloader_sync.sqlalchemy._auto"},
    }


def test_the_core_imports_no_integration() -> None:
    graph = import_graph()
    core = {name for name in graph if folder_of(name) in ("dataloader_sync", "dataloader_sync._core")}
    assert {(name, m) for name in core for m in graph[name] if m not in core} == set()


def test_the_core_folder_imports_nothing_from_beside_it() -> None:
    graph = import_graph()
    inside = {name for name in graph if folder_of(name) == "dataloader_sync._core"}
    assert inside, "the _core/ folder is found"
    assert {(name, m) for name in inside for m in graph[name] if m not in inside} == set()


def test_no_module_outside_the_core_reads_a_private_attribute_of_a_core_class() -> None:
    assert {"_lock", "_queue", "_ticket", "_follow", "_batch"} <= core_private_names(), "the core's classes are read"
    assert reads_across_the_core_boundary() == []


def test_the_boundary_check_finds_a_read_across_it(tmp_path: Path) -> None:
    package = tmp_path / "dataloader_sync"
    (package / "_core").mkdir(parents=True)
    (package / "_core" / "_thing.py").write_text("class Thing:\n    def __init__(self):\n        self._secret = 1\n")
    (package / "_user.py").write_text("def peek(thing):\n    return thing._secret\n")
    (package / "_core" / "_friend.py").write_text("def peek(thing):\n    return thing._secret\n")
    assert reads_across_the_core_boundary(package) == [("_user.py", 2, "_secret")]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_each_DataLoader_field_is_declared_in_one_Protocol_at_most() -> None:
    declarations = loader_field_declarations()
    assert "_lock" in declarations, "the loader's Protocol is found"
    assert {field: where for field, where in declarations.items() if len(where) > 1} == {}


def test_at_most_three_functions_are_over_60_lines() -> None:
    assert len(long_functions()) <= 3, long_functions()


def test_the_module_map_names_every_module_and_only_modules() -> None:
    named = module_map()
    files = package_files()
    assert sorted(files - named) == [], "modules the map of docs/design.rst does not name"
    assert sorted(named - files) == [], "names in the map that are not modules"


def test_the_module_map_reader_reads_only_its_section() -> None:
    text = ("Intro\n=====\n\n``x.py``\n\nModule map\n==========\n\n- ``a.py``: A.\n- ``graphql/_b.py``: B.\n\n"
            "Next\n====\n\n``c.py``\n")
    assert module_map(text) == {"a.py", "graphql/_b.py"}


if __name__ == "__main__":
    reads = cross_module_private_reads()
    print(f"{len(reads)} reads of another module's private attributes")
    across = reads_across_the_core_boundary()
    print(f"{len(across)} of a _core class's, from outside _core/")
    for where, line, attr in across:
        print(f"  {where}:{line} {attr}")


# -- one wall per upstream -----------------------------------------------------------------
#: Each upstream whose private names the package reads, by top-level module, and the one module that may
#: read them (its wall): CPython's standard library in ``_core/_compat.py``, graphql-core in
#: ``graphql/_compat.py``.
WALLS = {**dict.fromkeys(("concurrent", "asyncio", "sys", "threading", "inspect", "types", "contextvars",
                          "weakref", "functools", "collections", "typing", "gc", "os", "itertools"),
                         "_core/_compat.py"),
         "graphql": "graphql/_compat.py"}

#: The standard ``Future``'s private fields (``_core/_compat.FUTURE_FIELDS``, checked there at import) read
#: directly outside ``_core/`` (whose ``Future`` keeps them in the standard layout and owns them), by module,
#: with the reason a call through the wall would not do. ``_state`` of a Django model is Django's
#: ``Model._state`` (public in practice), not a future's.
HOT_FUTURE_READS = {
    "graphql/_loop.py": "the execution loop reads each done future's outcome once per field: a call per read "
                        "costs about 100 ns per field (tools/bench.py, single-tick)",
    "graphql/_execution.py": "the field loop tells a done future from a pending one per resolver value",
    "graphql/_levels.py": "a level's done futures are read per field, as in graphql/_loop.py",
    "_timer.py": "ScheduledFuture is a concurrent.futures.Future: its state moves as the standard one's",
    "django/_inplace.py": "Django's Model._state",
    "django/_fetch_level.py": "Django's Model._state",
    "django/_generic.py": "Django's Model._state",
    "django/_orm.py": "Django's Model._state",
    "django/_recorded_querysets.py": "Django's Model._state",
}


def _module_names(tree: ast.AST) -> dict[str, str]:
    """The names a module binds to an imported module, with that module's dotted name."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    bound[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:  # ``from graphql import pyutils``: maybe a module
                bound.setdefault(alias.asname or alias.name, f"{node.module}.{alias.name}")
    return bound


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def upstream_private_reads(package: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """Reads of an upstream's private name (``WALLS``) outside that upstream's wall: an import of a private
    module or name (``from concurrent.futures._base import ...``, ``from asyncio import _x``), or ``m._x``
    of a name bound to one of its modules (``sys._getframe``)."""
    out = []
    for path in sorted(package.rglob("*.py")):
        where = str(path.relative_to(package))
        tree = ast.parse(path.read_text())
        bound = _module_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                wall = WALLS.get(node.module.partition(".")[0])
                names = [a.name for a in node.names if _private(a.name)]
                if any(_private(part) for part in node.module.split(".")):
                    names.append(node.module)
                if wall is not None and wall != where:
                    out.extend((where, node.lineno, f"{node.module}: {name}") for name in names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    wall = WALLS.get(alias.name.partition(".")[0])
                    if wall is not None and wall != where and any(_private(p) for p in alias.name.split(".")):
                        out.append((where, node.lineno, alias.name))
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                base: ast.AST = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in bound:
                    wall = WALLS.get(bound[base.id].partition(".")[0])
                    if wall is not None and wall != where:
                        out.append((where, node.lineno, f"{base.id}....{node.attr}"))
    return out


def future_field_reads(package: Path = PACKAGE) -> dict[str, int]:
    """Attribute reads of the standard ``Future``'s private fields outside ``_core/``, counted by module."""
    from dataloader_sync._core._compat import FUTURE_FIELDS
    out: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        where = str(path.relative_to(package))
        if where.startswith("_core/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in FUTURE_FIELDS:
                out[where] = out.get(where, 0) + 1
    return out


def test_no_module_outside_its_upstreams_wall_reads_an_upstream_private_name() -> None:
    assert upstream_private_reads() == []


def test_the_standard_futures_private_fields_are_read_outside_the_core_only_where_listed() -> None:
    assert sorted(future_field_reads()) == sorted(HOT_FUTURE_READS)


def test_the_wall_check_finds_a_private_read(tmp_path: Path) -> None:
    (tmp_path / "_core").mkdir()
    (tmp_path / "_core" / "_compat.py").write_text("import sys\nframe = sys._getframe\n")
    (tmp_path / "x.py").write_text(
        "import sys\nimport concurrent.futures as cf\nfrom asyncio import _get_running_loop\n"
        "from concurrent.futures._base import PENDING\nsys._getframe(0)\ncf._base.FINISHED\n")
    assert [line for _, line, _ in upstream_private_reads(tmp_path)] == [3, 4, 5, 6]
