"""The typed surface: DataLoader's constructor overloads stay in step with its implementation.

The typed usage itself is checked by mypy and pyright on tests/type_tests/
(see .ci/run); this module checks what a type checker cannot: that every
``__init__`` overload offers every parameter of the implementation, keyword-only
and optional where it is (by name, or through ``**options:
Unpack[LoaderOptions]``), so a parameter added to the implementation alone
fails here instead of being refused to typed users.
"""
from __future__ import annotations

import ast
import inspect

import dataloader_sync._core._dataloader as dataloader_module
from dataloader_sync import DataLoader

Params = list[tuple[str, str, str]]  # (name, kind, default as source)


def _init_defs() -> list[ast.FunctionDef]:
    tree = ast.parse(inspect.getsource(dataloader_module))
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "DataLoader")
    return [node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "__init__"]


def _is_overload(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "overload" for d in fn.decorator_list)


def _keyword_params(fn: ast.FunctionDef) -> Params:
    args = fn.args
    defaults: dict[str, str] = {
        a.arg: ("<required>" if d is None else ast.unparse(d)) for a, d in zip(args.kwonlyargs, args.kw_defaults)
    }
    return [(a.arg, "keyword", defaults[a.arg]) for a in args.kwonlyargs]


def test_DataLoader_init_overloads_carry_every_parameter_of_the_implementation():
    from dataloader_sync._core._dataloader import LoaderOptions

    defs = _init_defs()
    overloads = [fn for fn in defs if _is_overload(fn)]
    (implementation,) = [fn for fn in defs if not _is_overload(fn)]
    assert len(overloads) >= 9  # 4 shapes x with/without pass_env, and the catch-all
    expected = _keyword_params(implementation)
    options = list(LoaderOptions.__annotations__)
    assert not LoaderOptions.__required_keys__  # every option is optional, as in the implementation
    assert all(want != "<required>" for _, _, want in expected)
    for fn in overloads:
        named = _keyword_params(fn)
        # pass_env and cache_key_fn by name (their types follow the overload), the rest as **options
        assert [name for name, _, _ in named] == ["pass_env", "cache_key_fn"], ast.unparse(fn.args)
        assert fn.args.kwarg is not None and ast.unparse(fn.args.kwarg.annotation) == "Unpack[LoaderOptions]"
        assert sorted([name for name, _, _ in named] + options) == sorted(name for name, _, _ in expected)
        for name, _, default in named:
            if name == "pass_env":  # Literal[False] = ..., or Literal[True] (required)
                assert default in ("...", "<required>")
            else:
                assert default == "..."
        assert [a.arg for a in fn.args.args] == ["self", "batch_load_fn"]


def test_DataLoader_runtime_signature_is_the_implementation():
    # inspect (and so help() and Sphinx) sees the implementation's parameters.
    params = inspect.signature(DataLoader).parameters
    assert list(params)[0] == "batch_load_fn"
    assert {"pass_env", "cache_key_fn", "clock"} <= set(params)
