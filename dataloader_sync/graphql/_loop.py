"""The execution loop: each placeholder completed once its future is done.

``DataLoaderExecutionContext`` (``_execution``) runs graphql-core's
completion until every value that waits for a future is a placeholder in
the result (``_run``); ``drain`` then completes, dispatches and waits until
none is left — the loop docs/graphql.rst draws ("The execution loop").

Guarantees:
- A placeholder is completed by graphql-core's own ``complete_value`` (or a
  subclass's), with the arguments it would have received had the value been
  there all along; an error goes through ``fail``: graphql-core's
  ``handle_field_error`` at the placeholder's position and, while the
  position is non-null, at each enclosing one (frames, then the root).
- One copy of each completion step it shares: ``complete_into`` (a plain
  value at a field of an object, completed into its results dict: the path
  of ``resume_done`` and ``resume_pending``; ``resume`` completes every
  other placeholder), and ``serialize_leaf`` (a leaf's value serialized as
  graphql-core 3.2's ``complete_leaf_value`` does, also the path of
  ``_execution.execute_fields``).  ``resume_done``, which walks the unwatched
  placeholders once per step of the loop, reads a done future's fields and its waiting entry's slots
  (``_run.Waiting``) inline, and writes a value its leaf type's serializer
  would return as it is without a call (``Run.as_is``), as graphql-core
  3.2's field loop (``_execution.execute_fields``) does with its plan: a
  call less per field (the figures are in the commit messages).
- The loop reads the execution context only through ``Execution``, the seam
  it declares; it runs on the request thread only.
"""
from __future__ import annotations

import concurrent.futures as cf
from itertools import islice
from typing import Any, Optional, Protocol

from graphql.language import FieldNode as _FieldNode
from graphql.pyutils import Undefined as _Undefined
from graphql.type import GraphQLEnumType, GraphQLScalarType

from .._core import FINISHED
from .._core import PENDING as _PENDING
from .._core import RUNNING as _RUNNING
from . import _compat
from ._awaitables import KNOWN_TYPE
from ._run import ENTRY, IS_TYPE_OF, TYPE, VALUE, Frame, Pending, Run, levels, locate
from ._scope import ExecutionStalledError

__all__ = ["LEAF_TYPES", "Execution", "drain", "serialize_leaf"]

_Future = cf.Future
_base_complete_value = _compat.Base.complete_value
_handle = _compat.handle
_known_type = KNOWN_TYPE  # _known_type(cls) is False: is_plain(cls), without a call
LEAF_TYPES = (GraphQLScalarType, GraphQLEnumType)  # graphql-core's is_leaf_type

_as_is = _compat.SERIALIZED_AS_IS  # _as_is(id(serialize)) is cls: a cls value is serialized as it is
_MIN_INT, _MAX_INT = _compat.MIN_INT, _compat.MAX_INT

#: What ``resume_done`` reads from a done future that failed or was cancelled (``outcome`` raises its error).
FAILED: Any = object()


class Execution(Protocol):
    """What the loop uses of ``DataLoaderExecutionContext``: the seam between the two modules."""

    stall_timeout: Optional[float]
    _frame: Optional[Frame]  # the object being completed: set around each completion
    _direct: bool  # graphql-core's complete_value may be called directly (not overridden)
    _own_leaf: bool  # graphql-core 3.2's complete_leaf_value may be inlined (not overridden)

    def complete_value(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                       *rest: Any) -> Any: ...

    def complete_leaf_value(self, return_type: Any, result: Any) -> Any: ...

    def ensure_valid_runtime_type(self, runtime_type_name: Any, return_type: Any, field_nodes: Any,
                                  info: Any, result: Any) -> Any: ...

    def complete_object_value(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                              *rest: Any) -> Any: ...

    def _complete_fields(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                         rest: tuple[Any, ...]) -> Any: ...


# -- the completion of a plain value --------------------------------------------------
def _complete(ctx: Execution, pending: Pending, value: Any, direct: bool) -> Any:
    """``complete_value`` of *value* at *pending*'s position: graphql-core's, if *direct*."""
    if direct:
        return _base_complete_value(ctx, pending.return_type, pending.nodes, pending.info, pending.path, value,
                                    *pending.rest)
    return ctx.complete_value(pending.return_type, pending.nodes, pending.info, pending.path, value, *pending.rest)


def complete_into(ctx: Execution, run: Run, pending: Pending, container: Any, key: Any, value: Any,
                  direct: bool) -> None:
    """``container[key]``, the placeholder of *pending*, becomes *value* completed (None when that raised)."""
    saved = ctx._frame
    ctx._frame = pending.frame
    try:
        container[key] = _complete(ctx, pending, value, direct)
    except Exception as raw_error:
        container[key] = None
        fail(ctx, run, pending, raw_error)
    finally:
        ctx._frame = saved


# -- the loop ---------------------------------------------------------------------------
def drain(ctx: Execution, run: Run) -> None:
    """Complete, dispatch and wait until no placeholder is left.

    Each step: completions first (watched ones the scope received, then
    unwatched ones whose future is done, in creation order); with none,
    dispatch the loaders that queued keys; with none, watch every
    placeholder and wait for the scope to hear of a completion or a load.
    """
    scope = run.scope
    while (run.unwatched or run.watched) and run.root_error is None:
        ready, loaders = scope.take()
        if loaders:
            run.to_dispatch.update(loaders)
        if ready:
            watched = run.watched
            run.resuming = ready
            try:
                for pending in ready:
                    del watched[pending]
                    resume(ctx, run, pending, None)
            finally:
                run.resuming = []
        elif resume_done(ctx, run):
            pass
        elif run.to_dispatch:
            loaders, run.to_dispatch = run.to_dispatch, {}
            run.dispatch(loaders)
        elif not run.sweep():
            run.watch()
            if not scope.wait(ctx.stall_timeout, run.wake_ticks):
                fail_all(ctx, run, ExecutionStalledError(run.stall_message(ctx.stall_timeout)))


def resume_done(ctx: Execution, run: Run) -> bool:
    """Complete the unwatched placeholders whose future is done; False if there was none.

    The common case — a field of an object whose future holds a plain value,
    nothing nulled — is completed here: a nullable scalar or enum serialized
    without a ``Pending``, any other value straight into the object's results
    dict (``complete_into``); every other case goes through ``resume``.

    The step before each dispatch finds none done (a level's loads are all
    still queued): ``first_done`` reads each entry's state only, and the
    list stays as it is.  Otherwise the entries before the first done one
    move to the new list in one slice, and the walk starts there.
    """
    unwatched = run.unwatched
    start = first_done(unwatched)
    if start < 0:
        return False
    # The spare list (see Run.spare) is the new one: placeholders created while resuming join it too.
    still = run.unwatched = run.spare
    assert not still and still is not unwatched, "Run.spare is empty and is not unwatched"
    run.walking = unwatched
    try:
        still += unwatched[:start]
        return _resume_done(ctx, run, unwatched, still, start)
    finally:
        run.walking = []
        unwatched.clear()
        run.spare = unwatched


def first_done(unwatched: list[Any]) -> int:
    """The index of the first entry of *unwatched* whose future is done, or -1 (the state read as
    ``_resume_done`` reads it)."""
    for i in range(0, len(unwatched), ENTRY):
        state = unwatched[i]._state
        if state is not _PENDING and state is not _RUNNING:
            return i
    return -1


def _resume_done(ctx: Execution, run: Run, unwatched: list[Any], still: list[Any], start: int) -> bool:
    """``resume_done``'s walk over *unwatched* from the entry at *start* (a done one: it returns True);
    the entries still pending go to *still*."""
    pending_of = run.pending_of
    direct = ctx._direct
    own_leaf = ctx._own_leaf
    clean = not run.nulled and run.root_error is None  # read again after each call that may change it
    as_is = run.as_is
    as_is_of = as_is.get
    it = islice(unwatched, start, None)
    for future, frame, nodes, return_type, pending in zip(it, it, it, it, it):  # a Waiting's slots
        # CPython's Future fields, read as done() + result() would but without their lock and calls (the
        # stdlib's Future and ours write _state last: FINISHED seen, _result and _exception are written).
        state = future._state
        if state is _PENDING or state is _RUNNING:
            still += (future, frame, nodes, return_type, pending)
            continue
        value = future._result if state is FINISHED and future._exception is None else FAILED
        if frame is None:  # a placeholder other than a field of an object: its Pending
            resume_pending(ctx, run, pending, value, direct)
        elif (value is FAILED or not clean or _known_type(type(value)) is not False  # type(): see _awaitables
              or isinstance(value, _Future)):  # not is_plain(...)
            resume(ctx, run, pending_of(future, frame, nodes, return_type), None)
        elif frame.results is not None:  # else its object failed: nothing to write
            container = frame.results
            node = nodes[0]  # response_key(nodes), inline
            if node.__class__ is not _FieldNode:  # 3.3: field details
                node = node.node
            key = (node.alias or node.name).value
            if container[key] is not future:
                continue  # completed already
            cls = value.__class__
            same = as_is_of(return_type)  # hashable: graphql-core's schema keeps its types in sets
            if same is None:
                same = as_is[return_type] = _as_is_of(ctx, return_type)
            if same is cls and (cls is not int or _MIN_INT <= value <= _MAX_INT):
                container[key] = value  # what graphql-core's own serializer returns for it
                continue
            if direct and value is not None and isinstance(return_type, LEAF_TYPES) and not isinstance(
                    value, Exception):
                try:
                    # graphql-core's complete_value of a nullable scalar or enum, minus its type tests
                    container[key] = serialize_leaf(ctx, return_type, value, own_leaf)
                    continue
                except Exception as raw_error:
                    container[key] = None
                    fail(ctx, run, pending_of(future, frame, nodes, return_type), raw_error)
            else:
                complete_into(ctx, run, pending_of(future, frame, nodes, return_type), container, key, value, direct)
        else:
            continue
        clean = not run.nulled and run.root_error is None
    return True


def serialize_leaf(ctx: Execution, return_type: Any, value: Any, own_leaf: bool) -> Any:
    """graphql-core's ``complete_leaf_value`` of *value* (not None) at a scalar or enum *return_type*:
    3.2's steps when *own_leaf* (the method is not overridden): serialize, and call the method, which
    raises its error, only when that gives a null; else the method itself."""
    serialized = return_type.serialize(value) if own_leaf else None
    if serialized is None or serialized is _Undefined:
        serialized = ctx.complete_leaf_value(return_type, value)
    return serialized


def _as_is_of(ctx: Execution, return_type: Any) -> Any:
    """The class of the values *return_type*'s completion writes as they are (``Run.as_is``), or False."""
    if ctx._direct and ctx._own_leaf and isinstance(return_type, LEAF_TYPES):
        return _as_is(id(return_type.serialize)) or False
    return False


def resume_pending(ctx: Execution, run: Run, pending: Pending, value: Any, direct: bool) -> None:
    """Complete a ``Pending`` whose future is done (*value*, or ``FAILED``): inline when
    it is a field of an object (or a root field) holding a plain value, nothing nulled;
    through ``resume`` otherwise."""
    path = pending.path
    if (value is FAILED or pending.kind is not VALUE or path is not pending.info.path or run.nulled
            or run.root_error is not None or isinstance(value, _Future) or _known_type(value.__class__) is not False):
        resume(ctx, run, pending, None)
        return
    frame = pending.frame
    container = run.root if frame is None else frame.results
    key = path.key
    if container is None or container[key] is not pending:
        return  # its object failed (or it was completed): nothing to write
    complete_into(ctx, run, pending, container, key, value, direct)


def fail_all(ctx: Execution, run: Run, error: Exception) -> None:
    """Fail every placeholder left with *error* (the execution stalled)."""
    pending = list(run.watched) + run.pendings(run.unwatched)
    run.watched, run.unwatched = {}, []
    for one in pending:
        resume(ctx, run, one, error)


def _place(run: Run, pending: Pending) -> Any:
    """``(container, key)`` of *pending*'s placeholder, or None when its position is gone."""
    path = pending.path
    if path is pending.info.path and not run.nulled:
        # A field of an object (or a root field): its container is the
        # object's results dict, kept in the frame; None when the object's
        # completion raised (its position is nulled: nothing to do).
        frame = pending.frame
        container = run.root if frame is None else frame.results
        return None if container is None else (container, path.key)
    return run.slot(path)  # a list item, or positions were nulled: found from the root (None: nulled meanwhile)


def resume(ctx: Execution, run: Run, pending: Pending, error: Optional[Exception]) -> None:
    """Complete one placeholder (or fail it with *error*) and put the result in its place."""
    if run.root_error is not None:
        return  # the data is null: graphql-core runs nothing after that either
    place = _place(run, pending)
    if place is None:
        return
    container, key = place
    placeholder = container[key]
    if placeholder is not pending and placeholder is not pending.future:  # a field's placeholder is its future
        return
    saved = ctx._frame
    ctx._frame = pending.frame
    try:
        if error is not None:
            raise error
        value = pending.future.result()  # done: raises its error at once
        kind = pending.kind
        if kind == VALUE:  # a nested Future or Promise (not plain) goes through ours again
            completed = _complete(ctx, pending, value, ctx._direct and not isinstance(value, _Future)
                                  and _known_type(value.__class__) is False)
        elif kind == TYPE:
            object_type = ctx.ensure_valid_runtime_type(value, pending.return_type, pending.nodes, pending.info,
                                                        pending.source)
            completed = ctx.complete_object_value(object_type, pending.nodes, pending.info, pending.path,
                                                  pending.source, *pending.rest)
        else:
            assert kind == IS_TYPE_OF
            if not value:
                raise _compat.invalid_return_type_error(pending.return_type, pending.source, pending.nodes)
            completed = ctx._complete_fields(pending.return_type, pending.nodes, pending.info, pending.path,
                                             pending.source, pending.rest)
    except Exception as raw_error:
        if isinstance(raw_error, cf.CancelledError) and not str(raw_error):
            raw_error = cf.CancelledError("the future of this field was cancelled")
        completed = None
        fail(ctx, run, pending, raw_error)
    finally:
        ctx._frame = saved
    container[key] = completed


def fail(ctx: Execution, run: Run, pending: Pending, error: Exception) -> None:
    """Handle a field error at *pending*'s position and propagate it as graphql-core does."""
    frame, info, path, nodes = pending.frame, pending.info, pending.path, pending.nodes
    while True:
        for position, type_ in levels(info, path):
            try:
                _handle(ctx, error, type_, nodes, position)
            except _compat.GraphQLError as located:  # non-null: the parent position takes it
                error = located
                continue
            if position is not pending.path:
                run.parents.clear()  # containers below the nulled position are detached
                run.nulled = True  # from now on, positions are found from the root
                slot = locate(run.root, position)
                if slot is not None:
                    slot[0][slot[1]] = None
            return
        if frame is None:  # past the root fields: the whole data is null
            run.root_error = error
            return
        frame, info, path, nodes = frame.parent, frame.info, frame.path, frame.nodes
