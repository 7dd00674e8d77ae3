"""DataLoaderExecutionContext: graphql-core execution that waits for Futures.

Resolvers return ``concurrent.futures.Future``s (a loader's, a ``then`` chain,
an executor's); the execution stays synchronous and completes every value on
the request thread.  No event loop, so Django's ORM may run in resolvers.

Design: the execution loop (placeholders, frames, when loaders are
dispatched, when the loop waits) is explained, with a diagram, in
docs/graphql.rst ("The execution loop"); ``_loop`` runs it, ``_run`` holds
its state.

Guarantees:
- Results and errors are graphql-core's own: a resolved value goes through
  ``complete_value``; a failure goes through ``located_error`` +
  ``handle_field_error`` at the placeholder's position and, while the position
  is non-null, at each enclosing position in turn (types from each field's
  ``info.return_type``, enclosing fields from the frames recorded per object)
  — the steps of graphql-core's synchronous propagation.  An error that passes
  the root fields is raised from the root hook, where graphql-core makes the
  data null.  Only the *order* of sibling completions differs from plain
  values: siblings of a field that nulls their parent may run (and report
  errors) when, with plain values, they would not — as in graphql-core's own
  async execution.
- Overridden methods, and why each is safe across 3.2.0–3.3.x (see _compat):
  ``complete_value`` — a Future is unwrapped (done) or deferred, anything
  else goes to the base method unchanged; same arguments in every version
  (3.3 adds a trailing one, passed through).
  ``ensure_valid_runtime_type`` — a Future from ``resolve_type`` is unwrapped
  or turned into a marker; otherwise the base method.
  ``complete_object_value`` — re-implemented (the ``is_type_of`` check, then
  ``_compat.execute_subfields``) to accept a Future from ``is_type_of`` and to
  record the frame; graphql-core's awaitable branch is not kept (see below).
  ``execute_fields`` (3.2 only) — graphql-core's loop with its
  ``execute_field`` inline; identical in every 3.2.x but for
  ``handle_field_error``'s arguments (``_compat.handle``).
  ``execute_fields_serially`` — root mutation fields run one base call per
  field, each drained before the next starts, so field 2 sees field 1's effect.
  ``execute_operation`` (3.2) / ``execute_root_grouped_field_set`` (3.3) —
  the root hook: installs the dispatch scope and runs the loop.
  ``handle_field_error`` is called, never overridden (``_compat.handle``).
- Batching: loaders are dispatched only when no completion is waiting to
  run, so loads of one level go out as one batch per loader.  Batches that
  run on executors complete at different times; the request thread
  dispatches the next level's loads when it is idle (as DataLoader.js does at
  the end of a tick), so a slow loader does not hold the others back — at
  worst one batch per loader per completed batch, never one per field.  A
  ticker-mode registry may also dispatch on its own thread mid-level.
- A registry in ``context_value`` (``_scope.registry_of``) is dispatched with
  ``dispatch_all()`` (its predicates apply); reported loaders outside it are
  dispatched directly.  Keys queued where no scope saw them are swept up
  before the loop waits.
- A plain value costs one ``isinstance`` per completed value and one
  ``Frame`` per object; a pending Future of a field of an object costs five list
  slots (``_run.Waiting``) and keeps nothing else alive (a ``Pending`` elsewhere), and a
  callback only if the loop has to wait for it.
- On graphql-core 3.2, an object's fields run in ``execute_fields`` itself
  (graphql-core's ``execute_field`` inline, see there): each field's
  definition, resolver and return type looked up once per selection
  (``_compat.plan_fields``), no argument coercion for a field that defines
  no argument (graphql-core 3.3 does the same), resolve infos and paths
  made as graphql-core's named tuples with ``tuple.__new__``
  (``_compat.FAST_TUPLES``, unless ``build_resolve_info`` is overridden),
  ``is_awaitable`` (always False here) not asked, a plain scalar or enum
  completed without a detour (``_loop.serialize_leaf``), a pending Future of a field of an object
  recorded at once (``complete_value``'s hot path) and a done one holding a
  value (a cached load) taken as that value; the rest goes to
  ``complete_value``.
  Middleware, or a subclass that overrides ``execute_field``, gets
  graphql-core's own method.
- graphql-core state is touched on the request thread only; other threads
  only append to the scope under its lock.
- Nothing hangs silently: if no future completes and no load is queued for
  ``stall_timeout`` seconds while fields wait, they fail with
  ``ExecutionStalledError`` naming the loaders whose keys were never
  dispatched (e.g. a registry predicate that never passes).
- Awaitables (``async def`` resolvers, ``is_type_of``, ``resolve_type``) are
  refused wherever they appear: ``complete_value`` checks each value's type
  once (``_awaitables``), closes a coroutine and raises, so the field fails
  with one clear message at its own path; graphql-core's ``is_awaitable`` is
  a constant False.
- A ``promise.Promise`` (graphene-django wraps thenables in it, e.g. in
  ``DjangoConnectionField``) is settled in ``complete_value``: its value, its
  error, or a Future deferred like a loader's (``_promises``).
- strawberry passes ``operation_extensions`` to the class it is given; the
  constructor takes it and does what strawberry's own class does with it
  (``_compat.adopt_strawberry``).
- After a mutation's top-level field, ``clear_loaders_after_mutation_fields``
  (off by default) clears the request's loaders.  Each loader an execution
  dispatches is checked once for reuse across requests (``_reuse``).
- Not supported: ``is_type_of`` returning a Future *inside graphql-core's
  default type resolver* (it takes any non-awaitable as a bool; return the
  type name, or a Future of it, from ``resolve_type`` instead).
"""
from __future__ import annotations

import concurrent.futures as cf
from typing import Any, Optional

from graphql.language import OperationType
from graphql.pyutils import Path as _Path

from .._core import FINISHED as _FINISHED
from .._core import PENDING as _PENDING
from .._core import RUNNING as _RUNNING
from .._core import reset_scope, seconds, set_scope, wait_timeout
from .._execution_levels import reset_levels, set_levels
from . import _compat
from ._awaitables import (
    KNOWN_TYPE,
    NEVER_AWAITABLE,
    drivable,
    drive,
    is_plain,
    refuse_awaitable,
    refusing_type_resolver,
)
from ._levels import Levels
from ._loop import LEAF_TYPES, drain, serialize_leaf
from ._promises import PromiseType, settle
from ._run import (
    IS_TYPE_OF,
    TYPE,
    VALUE,
    Frame,
    FutureType,
    Pending,
    Run,
    outcome,
)
from ._scope import ExecutionStalledError

__all__ = ["DataLoaderExecutionContext", "ExecutionStalledError"]

_Future = cf.Future
_Base = _compat.Base
_base_complete_value = _Base.complete_value
_base_ensure_valid_runtime_type = _Base.ensure_valid_runtime_type
_base_execute_fields_serially = _Base.execute_fields_serially
_base_execute_fields = _Base.execute_fields
_tuple_new = _compat.tuple_new
# 3.3: a field's completion gets its object's position_context; its waiting
# value may then be recorded as a field of that object (see complete_value).
_HOT_REST = _compat.IS_EXECUTOR and _compat.REBUILDS_INFO
_known_type = KNOWN_TYPE
_Info = _compat.Info
_handle = _compat.handle
_MIN_INT, _MAX_INT = _compat.MIN_INT, _compat.MAX_INT


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
            Subclass to change it: a subclass's value is checked when the
            class is made (a finite number of seconds > 0, or None).
        clear_loaders_after_mutation_fields: when True, after each top-level
            field of a mutation (its value and all its futures completed),
            ``clear_all()`` every loader of the context's registry and every
            loader the execution dispatched, so the next mutation field (and
            its payload) loads rows again instead of reading values cached
            before the change — graphql-ruby's behaviour.  False by default:
            a mutation that changes what a loader caches may ``clear(key)``
            itself.  Subclass to turn it on (a bool, checked when the class
            is made).
    """

    stall_timeout: Optional[float] = 30.0
    clear_loaders_after_mutation_fields: bool = False

    _frame: Optional[Frame] = None  # the object being completed
    _run: Optional[Run] = None  # set while the root selection set executes
    _levels: Optional[Levels] = None  # its levels (FETCH_LEVEL's peers), set with _run
    _direct = False  # graphql-core's complete_value may be called directly (set per instance)
    _own_leaf = False  # graphql-core's complete_leaf_value may be inlined (set per instance)
    _plans: Optional[dict[int, Any]] = None  # id(fields) -> (fields, parent type, plan), see execute_fields
    _info_tail: Optional[tuple[Any, ...]] = None  # what every resolve info shares, see __init__

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A bad stall_timeout fails when the subclass is made, not inside the
        # first execution that stalls; a very long one waits "for ever".
        super().__init_subclass__(**kwargs)
        if cls.stall_timeout is not None:
            cls.stall_timeout = wait_timeout(seconds("stall_timeout", cls.stall_timeout, positive=True))
        if not isinstance(cls.clear_loaders_after_mutation_fields, bool):  # "no" would turn it on
            raise TypeError("clear_loaders_after_mutation_fields must be a bool")

    def __init__(self, *args: Any, operation_extensions: Any = _compat.NOT_GIVEN, **kwargs: Any) -> None:
        """Built by graphql-core (``build``), with its arguments.

        Args:
            *args, **kwargs: graphql-core's, passed to the base class
                (``is_async_iterable``, which strawberry passes on 3.3, is one).
                A given ``is_awaitable`` is replaced: awaitables are refused.
            operation_extensions: passed by strawberry; kept as the attribute
                of that name and, like strawberry's own class does, given to
                its resolvers as ``info.input_extensions``.
        """
        super().__init__(*args, **kwargs)
        # Awaitables fail their field with one clear message, checked once per
        # value in complete_value (see _awaitables); whatever predicate the
        # caller passed is replaced.  A subscription keeps it until its root
        # selection set runs (_execute_root): graphql-core's subscribe awaits
        # the source stream's resolver with it (an async generator, or
        # strawberry's coroutine of one), then runs each event synchronously.
        if getattr(self.operation, "operation", None) is not OperationType.SUBSCRIPTION:
            self.is_awaitable = NEVER_AWAITABLE
        self.type_resolver = refusing_type_resolver(self.type_resolver)  # type: ignore[has-type]
        if operation_extensions is not _compat.NOT_GIVEN:
            _compat.adopt_strawberry(self, operation_extensions)
        cls = type(self)
        # graphql-core's completion called directly, unless a subclass overrides ours
        self._direct = cls.complete_value is DataLoaderExecutionContext.complete_value
        # graphql-core 3.2's complete_leaf_value may be inlined: serialize,
        # and only when that gives null, the method itself (which serializes
        # again and raises its own error).  3.3 calls coerce_output_value.
        self._own_leaf = not _compat.IS_EXECUTOR and cls.complete_leaf_value is _Base.complete_leaf_value
        # An object's fields run here (see execute_fields) unless middleware or
        # a subclass's execute_field is to see each field.
        self._plans: Optional[dict[int, Any]] = (
            {} if _compat.OWN_FIELDS and not self.middleware_manager and cls.execute_field is _Base.execute_field
            else None)
        # What every field's resolve info shares, when infos may be built as
        # graphql-core's build_resolve_info builds them (not overridden).
        self._info_tail: Optional[tuple[Any, ...]] = (
            (self.schema, self.fragments, self.root_value, self.operation, self.variable_values, self.context_value,
             self.is_awaitable)
            if self._plans is not None and _compat.FAST_TUPLES and cls.build_resolve_info is _Base.build_resolve_info
            and "build_resolve_info" not in self.__dict__ else None)

    # -- fields (graphql-core 3.2) ------------------------------------------------------
    if _compat.OWN_FIELDS:

        def execute_fields(self, parent_type: Any, source_value: Any, path: Any, fields: Any) -> Any:
            """graphql-core 3.2's ``execute_fields`` with its ``execute_field`` inline: the same steps,
            results and errors, minus per-field work that cannot change an outcome (the module notes)."""
            plan = self._plan(parent_type, fields)
            if plan is None:
                return _base_execute_fields(self, parent_type, source_value, path, fields)
            results: dict[str, Any] = {}
            type_name = parent_type.name
            complete_value = self.complete_value
            variable_values = self.variable_values
            own_leaf, direct = self._own_leaf, self._direct
            run, known_type = self._run, _known_type
            frame = self._frame if run is not None else None
            tail = self._info_tail
            schema, fragments, root_value, operation, variables, context, is_awaitable = tail or (None,) * 7
            build_resolve_info: Any = self.build_resolve_info if tail is None else None
            for response_name, field_nodes, field_def, resolve_fn, return_type, coerce, leaf, field_name in plan:
                if tail is not None:
                    # graphql-core's Path(...) and build_resolve_info(...), built as the same tuples
                    field_path = _tuple_new(_Path, (path, response_name, type_name))
                    info = _tuple_new(_Info, (field_name, field_nodes, return_type, parent_type, field_path, schema,
                                              fragments, root_value, operation, variables, context, is_awaitable))
                else:
                    field_path = _Path(path, response_name, type_name)
                    info = build_resolve_info(field_def, field_nodes, parent_type, field_path)
                try:
                    if coerce is None:
                        result = resolve_fn(source_value, info)
                    else:
                        result = resolve_fn(source_value, info, **coerce(field_def, field_nodes[0], variable_values))
                    if direct:
                        if isinstance(result, _Future):
                            state = result._state  # read as _loop.resume_done does: a call less per load than done()
                            if frame is not None and (state is _PENDING or state is _RUNNING):  # not done()
                                # complete_value's hot path (see there)
                                run.unwatched += (result, frame, field_nodes, return_type, None)  # type: ignore[union-attr, operator]  # a Waiting's slots
                                results[response_name] = result
                                continue
                            if state is not _FINISHED or result._exception is not None or isinstance(
                                    result._result, _Future):  # failed, cancelled, nested, or pending with no frame
                                results[response_name] = complete_value(return_type, field_nodes, info, field_path,
                                                                        result)
                                continue
                            result = result._result  # a cached load: its value, read as resume_done reads it
                        if leaf is result.__class__ and (leaf is not int or _MIN_INT <= result <= _MAX_INT):
                            results[response_name] = result  # what graphql-core's serializer returns (plan_fields)
                            continue
                        if (leaf and result is not None and known_type(result.__class__) is False  # is_plain
                                and not isinstance(result, Exception)):
                            # complete_value of a leaf minus its type tests, as in _loop.resume_done
                            results[response_name] = serialize_leaf(self, return_type, result, own_leaf)
                            continue
                    results[response_name] = complete_value(return_type, field_nodes, info, field_path, result)
                except Exception as raw_error:
                    _handle(self, raw_error, return_type, field_nodes, field_path)  # raises when non-null
                    results[response_name] = None
            return results

        def _plan(self, parent_type: Any, fields: Any) -> Optional[list[Any]]:
            """How *fields* of *parent_type* run (``_compat.plan_fields``), made once per
            selection; None when graphql-core's own ``execute_fields`` is to run them."""
            plans = self._plans
            if plans is None:
                return None
            known = plans.get(id(fields))
            if known is not None and known[0] is fields and known[1] is parent_type:
                plan: list[Any] = known[2]
                return plan
            plan = _compat.plan_fields(self, parent_type, fields, LEAF_TYPES)
            plans[id(fields)] = (fields, parent_type, plan)  # keeps *fields* alive: its id stays its own
            return plan

    # -- values ----------------------------------------------------------------------
    def complete_value(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                       *rest: Any) -> Any:
        if isinstance(result, _Future):
            state = result._state  # read as _loop.resume_done reads it
            if state is not _PENDING and state is not _RUNNING:  # done()
                if state is _FINISHED and result._exception is None and self._direct:
                    value = result._result  # a cached load's value: graphql-core completes it (if is_plain)
                    if not isinstance(value, _Future) and _known_type(value.__class__) is False:
                        return _base_complete_value(self, return_type, field_nodes, info, path, value, *rest)
                return self.complete_value(return_type, field_nodes, info, path, outcome(result), *rest)
            run = self._run
            if run is None:
                return self._defer(VALUE, result, return_type, field_nodes, info, path, rest, None)
            frame = self._frame
            if frame is not None and path is info.path and _compat.REBUILDS_INFO and (
                    rest is frame.rest  # 3.2: () and ()
                    or (_HOT_REST and len(rest) == 1 == len(frame.rest) and rest[0] is frame.rest[0])):
                # The hot path of every loaded field of an object: five slots
                # say where the value goes; the future is the placeholder; the
                # info and path are let go (built again only if needed).
                run.unwatched += (result, frame, field_nodes, return_type, None)  # a Waiting's slots
                return result
            pending = Pending(VALUE, result, frame, return_type, field_nodes, info, path, rest, None)
            run.unwatched += (result, None, None, None, pending)
            return pending
        cls = result.__class__
        if not is_plain(cls):  # first sight of this type, a Promise, or an awaitable (refused)
            if cls is PromiseType:  # graphene-django's wrapper of a thenable
                return self.complete_value(return_type, field_nodes, info, path, settle(result), *rest)
            if drivable(result):  # strawberry-django's wrapper of a loader future (see _awaitables)
                return self.complete_value(return_type, field_nodes, info, path, drive(result), *rest)
            refuse_awaitable(result)
        if cls is list and self._levels is not None and len(result) > 1:
            # a resolver's list: its items are one level (_levels) until each is completed
            lists = self._levels.lists
            lists.append((self._frame, result))
            try:
                return _base_complete_value(self, return_type, field_nodes, info, path, result, *rest)
            finally:
                lists.pop()
        return _base_complete_value(self, return_type, field_nodes, info, path, result, *rest)

    def ensure_valid_runtime_type(self, runtime_type_name: Any, return_type: Any, field_nodes: Any,
                                  info: Any, result: Any) -> Any:
        if isinstance(runtime_type_name, _Future):
            if not runtime_type_name.done():
                return FutureType(runtime_type_name, return_type)
            runtime_type_name = outcome(runtime_type_name)
        refuse_awaitable(runtime_type_name)
        return _base_ensure_valid_runtime_type(self, runtime_type_name, return_type, field_nodes, info, result)

    def complete_object_value(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                              *rest: Any) -> Any:
        if return_type.__class__ is FutureType:
            return self._defer(TYPE, return_type.future, return_type.abstract_type, field_nodes, info, path,
                               rest, result)
        is_type_of = return_type.is_type_of
        if is_type_of is not None:
            is_type = is_type_of(result, info)
            refuse_awaitable(is_type)
            if isinstance(is_type, _Future):
                if not is_type.done():
                    return self._defer(IS_TYPE_OF, is_type, return_type, field_nodes, info, path, rest, result)
                is_type = outcome(is_type)
            if not is_type:
                raise _compat.invalid_return_type_error(return_type, result, field_nodes)
        return self._complete_fields(return_type, field_nodes, info, path, result, rest)

    def _complete_fields(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                         rest: tuple[Any, ...]) -> Any:
        parent = self._frame
        frame = self._frame = Frame(parent, info, path, field_nodes, return_type, rest)
        try:
            # The fields' results dict: where the values of this object's
            # waiting fields go (Pending.frame -> results, without a path walk).
            results = frame.results = _compat.execute_subfields(self, return_type, field_nodes, path, result, rest)
            return results
        finally:
            self._frame = parent

    def _defer(self, kind: str, future: cf.Future[Any], return_type: Any, field_nodes: Any, info: Any, path: Any,
               rest: tuple[Any, ...], source: Any) -> Any:
        run = self._run
        if run is None:  # not inside the root hook (a custom entry point): wait here, bounded
            if not cf.wait([future], timeout=self.stall_timeout).done:
                raise ExecutionStalledError(
                    f"no result after {self.stall_timeout} s; outside the root selection set"
                    " only the waited future's own loader is dispatched, nothing batches the rest"
                )
            value = outcome(future)
            if kind == VALUE:
                return self.complete_value(return_type, field_nodes, info, path, value, *rest)
            if kind == TYPE:
                return_type = self.ensure_valid_runtime_type(value, return_type, field_nodes, info, source)
                return self.complete_object_value(return_type, field_nodes, info, path, source, *rest)
            if not value:
                raise _compat.invalid_return_type_error(return_type, source, field_nodes)
            return self._complete_fields(return_type, field_nodes, info, path, source, rest)
        pending = Pending(kind, future, self._frame, return_type, field_nodes, info, path, rest, source)
        run.unwatched += (future, None, None, None, pending)  # a Waiting's slots
        return pending

    # -- the root hook ---------------------------------------------------------------
    if _compat.IS_EXECUTOR:

        def execute_root_grouped_field_set(self, *args: Any) -> Any:
            return self._execute_root(_Base.execute_root_grouped_field_set, args)

    else:

        def execute_operation(self, *args: Any) -> Any:
            return self._execute_root(_Base.execute_operation, args)

    def _execute_root(self, execute_root: Any, args: tuple[Any, ...]) -> Any:
        if self._run is not None:
            return execute_root(self, *args)
        if self.is_awaitable is not NEVER_AWAITABLE:  # a subscription's event (see __init__): synchronous
            self._refuse_awaitables()
        run = self._run = Run(self.context_value, self)
        levels = self._levels = Levels(self, run)
        token = set_scope(run.scope)
        levels_token = set_levels(levels)
        try:
            data = execute_root(self, *args)
            if run.unwatched or run.watched:
                run.root = data
                drain(self, run)
            if run.root_error is not None:
                raise run.root_error
            return data
        finally:
            run.ended()  # loads it left queued are the ticks' again
            reset_levels(levels_token)
            reset_scope(token)
            self._run = None
            self._levels = None

    def _refuse_awaitables(self) -> None:
        self.is_awaitable = NEVER_AWAITABLE
        tail = self._info_tail
        if tail is not None:
            self._info_tail = (*tail[:-1], NEVER_AWAITABLE)

    def execute_fields_serially(self, parent_type: Any, source_value: Any, path: Any, fields: Any,
                                *rest: Any) -> Any:
        run = self._run
        if run is None or path is not None:
            return _base_execute_fields_serially(self, parent_type, source_value, path, fields, *rest)
        results = run.root = {}
        clear = self.clear_loaders_after_mutation_fields
        for response_name, field_nodes in fields.items():
            try:
                one = _base_execute_fields_serially(
                    self, parent_type, source_value, path, {response_name: field_nodes}, *rest
                )
                results.update(one)
                if run.unwatched or run.watched:
                    drain(self, run)
            finally:
                if clear:
                    run.clear_loaders()
            if run.root_error is not None:
                raise run.root_error
        return results
