"""The typed surface: DataLoader's constructor overloads stay in step with its implementation.

The typed usage itself is checked by mypy and pyright on tests/type_tests/
(see .ci/run); this module checks what a type checker cannot: that every
``__init__`` overload offers every parameter of the implementation, keyword-only
and optional where it is, so a parameter added to the implementation alone
fails here instead of being refused to typed users.
"""
from __future__ import annotations

import ast
import inspect

import dataloader_sync._dataloader as dataloader_module
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
    defs = _init_defs()
    overloads = [fn for fn in defs if _is_overload(fn)]
    (implementation,) = [fn for fn in defs if not _is_overload(fn)]
    assert len(overloads) >= 9  # 4 shapes x with/without pass_env, and the catch-all
    expected = _keyword_params(implementation)
    for fn in overloads:
        got = _keyword_params(fn)
        assert [name for name, _, _ in got] == [name for name, _, _ in expected], ast.unparse(fn.args)
        for (name, _, default), (_, _, want) in zip(got, expected):
            if name == "pass_env":  # Literal[False] = ..., or Literal[True] (required)
                assert default in ("...", "<required>")
            else:  # optional where the implementation has a default (typeshed's "= ...")
                assert (default == "<required>") == (want == "<required>"), name
                assert default in ("...", want), f"{name}: overload default {default}, implementation {want}"
        assert [a.arg for a in fn.args.args] == ["self", "batch_load_fn"]


def test_DataLoader_runtime_signature_is_the_implementation():
    # inspect (and so help() and Sphinx) sees the implementation's parameters.
    params = inspect.signature(DataLoader).parameters
    assert list(params)[0] == "batch_load_fn"
    assert {"pass_env", "cache_key_fn", "clock"} <= set(params)
