"""DataLoaderExecutionContext: graphql-core execution that waits for Futures.

Resolvers return ``concurrent.futures.Future``s (a loader's, a ``then`` chain,
an executor's); the execution stays synchronous and processes every result on
the request thread.  No event loop, so Django's ORM may run in resolvers.

Design.  graphql-core completes a plain value at once; a Future that is not
done yet is left in the result as a placeholder (``_Pending``) and the
synchronous pass goes on.  When the root selection set has run, the request
thread loops: it completes the placeholders whose futures are done (their
done-callbacks only enqueue), dispatches the loaders that queued keys when it
has nothing else to run, and otherwise blocks on a Condition until a future
completes or a load is queued.  A completed placeholder is found again by its
response path from the root data and replaced by graphql-core's own
completion of the value; completions may create further placeholders.

Guarantees:
- Results and errors are graphql-core's own: a resolved value goes through
  ``complete_value``; a failure goes through ``located_error`` +
  ``handle_field_error`` at the placeholder's position and, while the position
  is non-null, at each enclosing position in turn (the types come from each
  field's ``info.return_type``; the enclosing fields from a chain of frames,
  one per object being completed) — the same steps graphql-core's synchronous
  propagation takes.  An error that passes the root fields is raised from the
  root hook, where graphql-core turns it into ``data: null``.
- Overridden methods, and why each is safe across 3.2.0–3.3.x (see _compat):
  ``complete_value`` — a Future is unwrapped (done) or deferred, anything
  else goes to the base method unchanged; same signature in every version
  (3.3 adds a trailing argument, passed through).
  ``ensure_valid_runtime_type`` — a Future from ``resolve_type`` is unwrapped
  or turned into a marker; otherwise the base method.
  ``complete_object_value`` — re-implemented (the is_type_of check, then
  ``_compat.execute_subfields``) to accept a Future from ``is_type_of`` and to
  record the frame; graphql-core's awaitable branch is not kept (see below).
  ``execute_fields_serially`` — root mutation fields run one base call per
  field, each drained before the next starts, so field 2 sees field 1's effect.
  ``execute_operation`` (3.2) / ``execute_root_grouped_field_set`` (3.3) —
  the root hook: installs the dispatch scope and runs the loop.
- A plain value costs one ``isinstance`` per completed value and one frame
  tuple per object; nothing is allocated per field unless it returned a
  Future that is not done.
- graphql-core state is touched on the request thread only; other threads
  only append to the scope's queue under its lock.
- Nothing hangs silently: if no future completes and no load is queued for
  ``stall_timeout`` seconds while fields wait, they fail with
  ``ExecutionStalledError`` naming the loaders whose keys were never
  dispatched (e.g. a registry predicate that never passes).
- Not supported: awaitables (coroutines) from resolvers — the execution is
  synchronous; ``is_type_of`` returning a Future *inside graphql-core's
  default type resolver* (it takes any non-awaitable as a bool; return the
  type from ``resolve_type`` instead, or a Future of its name).
"""
from __future__ import annotations

import concurrent.futures as cf
import logging
from typing import Any, Dict, List, Optional

from .._dispatch_scope import reset_scope, set_scope
from .._registry import DataLoaderRegistry
from . import _compat
from ._scope import ExecutionStalledError, _Scope, registry_of

__all__ = ["DataLoaderExecutionContext", "ExecutionStalledError"]

_LOGGER = logging.getLogger("dataloader_sync")
_Future = cf.Future
_Base = _compat.Base
_base_complete_value = _Base.complete_value
_base_ensure_valid_runtime_type = _Base.ensure_valid_runtime_type
_base_execute_fields_serially = _Base.execute_fields_serially
_handle = _compat.handle

# What a placeholder waits for.
_VALUE, _TYPE, _IS_TYPE_OF = "value", "resolve_type", "is_type_of"


def _outcome(future: cf.Future) -> Any:
    """The value of a done future; raises its error (a cancellation gets a message)."""
    try:
        return future.result()
    except cf.CancelledError as exc:
        if str(exc):
            raise
        raise cf.CancelledError("the future of this field was cancelled") from None


class _Pending:
    """A position whose value waits for a future; it sits in the result until replaced."""

    __slots__ = ("scope", "kind", "future", "frame", "return_type", "nodes", "info", "path", "rest", "source")

    def __init__(self, scope: _Scope, kind: str, future: cf.Future, frame: Any, return_type: Any,
                 nodes: Any, info: Any, path: Any, rest: tuple, source: Any) -> None:
        self.scope = scope
        self.kind = kind
        self.future = future
        self.frame = frame  # (parent frame, info, path, nodes) of the enclosing object, or None
        self.return_type = return_type
        self.nodes = nodes
        self.info = info
        self.path = path
        self.rest = rest
        self.source = source  # the object value, for _TYPE and _IS_TYPE_OF

    def done(self, _future: cf.Future) -> None:
        # Any thread: only enqueue; the request thread completes the value.
        self.scope.ready(self)

    def __repr__(self) -> str:
        return f"<pending {self.kind} at {self.path.as_list()}>"


class _PendingType:
    """What ``ensure_valid_runtime_type`` returns for a ``resolve_type`` Future not yet done."""

    __slots__ = ("future", "abstract_type")

    def __init__(self, future: cf.Future, abstract_type: Any) -> None:
        self.future = future
        self.abstract_type = abstract_type


class _Run:
    """The state of one execution's root selection set (request thread only)."""

    __slots__ = ("scope", "pending", "root", "root_error", "registry", "seen")

    def __init__(self, context_value: Any) -> None:
        self.scope = _Scope()
        self.pending: Dict[_Pending, None] = {}  # placeholders not yet completed, in creation order
        self.root: Any = None  # the root data dict, once the root fields have run
        self.root_error: Optional[Exception] = None  # an error that nulled the whole data
        self.registry: Optional[DataLoaderRegistry] = registry_of(context_value)
        self.seen: Dict[Any, None] = {}  # every loader that queued keys in this execution


def _item_type(type_: Any) -> Any:
    if _compat.is_non_null_type(type_):
        type_ = type_.of_type
    return type_.of_type


def _levels(info: Any, path: Any) -> List[Any]:
    """``[(path, type)]`` from *path* up to the field ``info.path``, innermost first."""
    top = info.path
    chain = []
    while path is not top and path is not None:
        chain.append(path)
        path = path.prev
    type_ = info.return_type
    types = [type_]
    for _ in chain:
        type_ = _item_type(type_)
        types.append(type_)
    depth = len(chain)
    levels = [(p, types[depth - i]) for i, p in enumerate(chain)]
    levels.append((top, types[0]))
    return levels


def _locate(root: Any, path: Any) -> Any:
    """``(container, key)`` holding the value at *path*, or None when it is gone."""
    keys = []
    while path is not None:
        keys.append(path.key)
        path = path.prev
    node = root
    try:
        for i in range(len(keys) - 1, 0, -1):
            node = node[keys[i]]
        node[keys[0]]
    except (KeyError, IndexError, TypeError):  # an enclosing position was nulled
        return None
    return node, keys[0]


class DataLoaderExecutionContext(_Base):  # type: ignore[misc, valid-type]
    """A graphql-core execution context whose resolvers may return Futures.

    Pass it as ``execution_context_class=`` (graphql-core 3.2, graphene,
    graphene-django's ``GraphQLView``) or ``executor_class=`` (graphql-core
    3.3).  One instance runs one operation, on the calling thread; instances
    are not shared between threads.

    Attributes:
        stall_timeout: seconds the execution waits while nothing happens (no
            future completes, no load is queued) before it fails the waiting
            fields with ``ExecutionStalledError``; None waits forever.
            Subclass to change it.
    """

    stall_timeout: Optional[float] = 30.0

    _frame: Any = None  # (parent frame, info, path, nodes) of the object being completed
    _run: Optional[_Run] = None  # set while the root selection set executes

    # -- values ----------------------------------------------------------------------
    def complete_value(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                       *rest: Any) -> Any:
        if isinstance(result, _Future):
            if result.done():
                return self.complete_value(return_type, field_nodes, info, path, _outcome(result), *rest)
            return self._defer(_VALUE, result, return_type, field_nodes, info, path, rest, None)
        return _base_complete_value(self, return_type, field_nodes, info, path, result, *rest)

    def ensure_valid_runtime_type(self, runtime_type_name: Any, return_type: Any, field_nodes: Any,
                                  info: Any, result: Any) -> Any:
        if isinstance(runtime_type_name, _Future):
            if not runtime_type_name.done():
                return _PendingType(runtime_type_name, return_type)
            runtime_type_name = _outcome(runtime_type_name)
        return _base_ensure_valid_runtime_type(self, runtime_type_name, return_type, field_nodes, info, result)

    def complete_object_value(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                              *rest: Any) -> Any:
        if return_type.__class__ is _PendingType:
            return self._defer(_TYPE, return_type.future, return_type.abstract_type, field_nodes, info, path,
                               rest, result)
        is_type_of = return_type.is_type_of
        if is_type_of is not None:
            is_type = is_type_of(result, info)
            if isinstance(is_type, _Future):
                if not is_type.done():
                    return self._defer(_IS_TYPE_OF, is_type, return_type, field_nodes, info, path, rest, result)
                is_type = _outcome(is_type)
            if not is_type:
                raise _compat.invalid_return_type_error(return_type, result, field_nodes)
        return self._complete_fields(return_type, field_nodes, info, path, result, rest)

    def _complete_fields(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                         rest: tuple) -> Any:
        parent = self._frame
        self._frame = (parent, info, path, field_nodes)
        try:
            return _compat.execute_subfields(self, return_type, field_nodes, path, result, rest)
        finally:
            self._frame = parent

    def _defer(self, kind: str, future: cf.Future, return_type: Any, field_nodes: Any, info: Any, path: Any,
               rest: tuple, source: Any) -> Any:
        run = self._run
        if run is None:  # not inside a root hook (a custom entry point): wait here
            value = _outcome(future)
            if kind == _VALUE:
                return self.complete_value(return_type, field_nodes, info, path, value, *rest)
            if kind == _TYPE:
                return_type = self.ensure_valid_runtime_type(value, return_type, field_nodes, info, source)
                return self.complete_object_value(return_type, field_nodes, info, path, source, *rest)
            if not value:
                raise _compat.invalid_return_type_error(return_type, source, field_nodes)
            return self._complete_fields(return_type, field_nodes, info, path, source, rest)
        pending = _Pending(run.scope, kind, future, self._frame, return_type, field_nodes, info, path, rest, source)
        run.pending[pending] = None
        future.add_done_callback(pending.done)
        return pending

    # -- the root hook ---------------------------------------------------------------
    if _compat.IS_EXECUTOR:

        def execute_root_grouped_field_set(self, *args: Any) -> Any:
            return self._execute_root(_Base.execute_root_grouped_field_set, args)

    else:

        def execute_operation(self, *args: Any) -> Any:
            return self._execute_root(_Base.execute_operation, args)

    def _execute_root(self, execute_root: Any, args: tuple) -> Any:
        if self._run is not None:
            return execute_root(self, *args)
        run = self._run = _Run(self.context_value)
        token = set_scope(run.scope)
        try:
            data = execute_root(self, *args)
            if run.pending:
                if self.is_awaitable(data):
                    close = getattr(data, "close", None)
                    if close is not None:
                        close()
                    raise _compat.GraphQLError(
                        "DataLoaderExecutionContext executes synchronously:"
                        " resolvers must return values or concurrent.futures.Future, not awaitables."
                    )
                run.root = data
                self._drain(run)
            if run.root_error is not None:
                raise run.root_error
            return data
        finally:
            reset_scope(token)
            self._run = None

    def execute_fields_serially(self, parent_type: Any, source_value: Any, path: Any, fields: Any,
                                *rest: Any) -> Any:
        run = self._run
        if run is None or path is not None:
            return _base_execute_fields_serially(self, parent_type, source_value, path, fields, *rest)
        results = run.root = {}
        for response_name, field_nodes in fields.items():
            one = _base_execute_fields_serially(
                self, parent_type, source_value, path, {response_name: field_nodes}, *rest
            )
            results.update(one)
            if run.pending:
                self._drain(run)
            if run.root_error is not None:
                raise run.root_error
        return results

    # -- the loop ----------------------------------------------------------------------
    def _drain(self, run: _Run) -> None:
        """Complete, dispatch and wait until no placeholder is left."""
        take = run.scope.take
        timeout: Optional[float] = 0.0  # 0: look without waiting
        while run.pending and run.root_error is None:
            ready, loaders = take(timeout)
            if ready:
                for pending in ready:
                    self._resume(run, pending, None)
                timeout = 0.0
            elif loaders:
                self._dispatch(run, loaders)
                timeout = 0.0
            elif timeout == 0.0:
                # Nothing to run, nothing reported: keys queued outside the scope?
                timeout = 0.0 if self._sweep(run) else self._wait_time()
            else:
                self._stalled(run)

    def _wait_time(self) -> Optional[float]:
        stall_timeout = self.stall_timeout
        return None if stall_timeout is None else max(stall_timeout, 1e-6)

    def _dispatch(self, run: _Run, loaders: Dict[Any, None]) -> None:
        run.seen.update(loaders)
        registry = run.registry
        if registry is not None:
            members = {id(loader) for loader in registry.values()}
            try:
                registry.dispatch_all()  # its predicates apply; the first call starts a ticker
            except Exception:
                _LOGGER.exception("dispatch_all() of %r raised", registry)
            loaders = {loader: None for loader in loaders if id(loader) not in members}
        for loader in loaders:
            try:
                loader.dispatch_count()
            except Exception:
                _LOGGER.exception("dispatch of %r raised", loader)

    def _sweep(self, run: _Run) -> int:
        """Dispatch keys queued where the scope could not see them; how many were sent."""
        sent = 0
        registry = run.registry
        if registry is not None and registry.dispatch_depth:
            try:
                sent += registry.dispatch_all_with_count()
            except Exception:
                _LOGGER.exception("dispatch_all() of %r raised", registry)
        for loader in run.seen:
            if loader.dispatch_depth and (registry is None or registry.get(loader.name or "") is not loader):
                try:
                    sent += loader.dispatch_count()
                except Exception:
                    _LOGGER.exception("dispatch of %r raised", loader)
        return sent

    def _stalled(self, run: _Run) -> None:
        waiting: List[Any] = [loader for loader in run.seen if loader.dispatch_depth]
        if run.registry is not None:
            waiting.extend(loader for loader in run.registry.values()
                           if loader.dispatch_depth and loader not in run.seen)
        described = ", ".join(
            f"{loader.name or repr(loader)!s} ({loader.dispatch_depth} keys)" for loader in waiting
        )
        why = (f"keys queued but never dispatched: {described} (a dispatch predicate kept refusing them)"
               if waiting else "no loader has queued keys: the futures are pending elsewhere"
               " (an executor, or a future nobody completes)")
        error = ExecutionStalledError(
            f"no progress for {self.stall_timeout} s with {len(run.pending)} field(s) still waiting; {why}"
        )
        for pending in list(run.pending):
            self._resume(run, pending, error)

    def _resume(self, run: _Run, pending: _Pending, error: Optional[Exception]) -> None:
        """Complete one placeholder (or fail it with *error*) and put the result in its place."""
        del run.pending[pending]
        path = pending.path
        slot = _locate(run.root, path)
        if slot is None or slot[0][slot[1]] is not pending:
            return  # an enclosing position was nulled meanwhile: nothing to do
        container, key = slot
        saved = self._frame
        self._frame = pending.frame
        try:
            try:
                if error is not None:
                    raise error
                value = _outcome(pending.future)
                kind = pending.kind
                if kind == _VALUE:
                    completed = self.complete_value(pending.return_type, pending.nodes, pending.info, path,
                                                    value, *pending.rest)
                elif kind == _TYPE:
                    object_type = self.ensure_valid_runtime_type(value, pending.return_type, pending.nodes,
                                                                 pending.info, pending.source)
                    completed = self.complete_object_value(object_type, pending.nodes, pending.info, path,
                                                           pending.source, *pending.rest)
                else:
                    if not value:
                        raise _compat.invalid_return_type_error(pending.return_type, pending.source,
                                                                pending.nodes)
                    completed = self._complete_fields(pending.return_type, pending.nodes, pending.info, path,
                                                      pending.source, pending.rest)
            except Exception as raw_error:
                completed = None
                self._fail(run, pending, raw_error)
            container[key] = completed
        finally:
            self._frame = saved

    def _fail(self, run: _Run, pending: _Pending, error: Exception) -> None:
        """Handle a field error at *pending*'s position and propagate it as graphql-core does."""
        frame, info, path, nodes = pending.frame, pending.info, pending.path, pending.nodes
        while True:
            for position, type_ in _levels(info, path):
                try:
                    _handle(self, error, type_, nodes, position)
                except _compat.GraphQLError as located:  # non-null: the parent position takes it
                    error = located
                    continue
                if position is not pending.path:
                    slot = _locate(run.root, position)
                    if slot is not None:
                        slot[0][slot[1]] = None
                return
            if frame is None:  # past the root fields: the whole data is null
                run.root_error = error
                return
            frame, info, path, nodes = frame
