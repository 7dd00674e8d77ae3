"""Placeholders, the positions they stand for, and one execution's loop state.

Guarantees:
- A ``Pending`` is what the result holds at a position whose value waits for
  a future (other than a field of an object, see below, which gets one only
  when its value needs it); it carries exactly the arguments graphql-core's ``complete_value``
  received there, plus the enclosing frame, so the completion can resume as if
  the value had been there all along.
- Positions are graphql-core ``Path``s; a ``Frame`` is an object being
  completed: its parent frame, the resolve info of the field that holds it,
  its path, field nodes and type, ``results``, its fields' dict once built
  (where its waiting fields' values go), and ``rest``, the trailing
  arguments of its completion, which its fields' completions get too (3.3's
  ``position_context``).
  ``levels()`` turns a field's info and a position into the ``(path, type)``
  pairs that graphql-core's own error handling visits (field, then list
  items).
- The common waiting position — a field of an object (not a root field, not
  a list item) whose resolver returned a pending Future — keeps no object of
  its own while it waits: ``Run.unwatched`` holds the fields of a
  ``Waiting`` for it as ``ENTRY`` slots in a row (``future, frame, field
  nodes, return type, None``), the results dict holds the future itself as
  the placeholder, and the field's resolve info and path (graphql-core's,
  freed when the resolver returned) are built again only if its value needs
  them (an object or list value, an error, a subclass's ``complete_value``)
  — ``Run.pending_of``.  Every other waiting position is a ``Pending``,
  stored as ``future, None, None, None, pending``.  So a level of waiting
  fields keeps no cyclic-GC-tracked object per field beyond the future
  (a ``Waiting`` made per field would be one): fewer young collections,
  less for older ones to walk.
- ``Run`` is touched by the request thread only; only its ``scope`` is shared.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import weakref
from typing import Any, NamedTuple, Optional

from .._registry import DataLoaderRegistry, holds, wake_tickers
from . import _compat
from ._reuse import check_reuse, request_of, watch_for_reuse
from ._scope import Scope, registry_of

_LOGGER = logging.getLogger("dataloader_sync")

# What a placeholder waits for.
VALUE, TYPE, IS_TYPE_OF = "value", "resolve_type", "is_type_of"



def outcome(future: cf.Future[Any]) -> Any:
    """The value of a done future; raises its error (a cancellation gets a message)."""
    try:
        return future.result()
    except cf.CancelledError as exc:
        if str(exc):
            raise
        raise cf.CancelledError("the future of this field was cancelled") from None


class Frame:
    """An object being completed (see the module notes): one slotted object, as cheap for the GC as a list."""

    __slots__ = ("parent", "info", "path", "nodes", "results", "type", "rest")

    def __init__(self, parent: Optional[Frame], info: Any, path: Any, nodes: Any, object_type: Any,
                 rest: Any) -> None:
        self.parent = parent
        self.info = info
        self.path = path
        self.nodes = nodes
        self.results: Any = None  # the object's fields' dict, once built
        self.type = object_type
        self.rest = rest


class Pending:
    """A position whose value waits for a future; it sits in the result until replaced."""

    __slots__ = ("kind", "future", "frame", "return_type", "nodes", "info", "path", "rest", "source")

    def __init__(self, kind: str, future: cf.Future[Any], frame: Any, return_type: Any, nodes: Any, info: Any,
                 path: Any, rest: tuple[Any, ...], source: Any) -> None:
        self.kind = kind
        self.future = future
        self.frame = frame  # the Frame of the enclosing object, or None
        self.return_type = return_type
        self.nodes = nodes
        self.info = info
        self.path = path
        self.rest = rest
        self.source = source  # the object value, for TYPE and IS_TYPE_OF

    def __repr__(self) -> str:
        return f"<pending {self.kind} at {self.path.as_list()}>"


class FutureType:
    """What ``ensure_valid_runtime_type`` returns for a ``resolve_type`` Future not yet done."""

    __slots__ = ("future", "abstract_type")

    def __init__(self, future: cf.Future[Any], abstract_type: Any) -> None:
        self.future = future
        self.abstract_type = abstract_type


def _item_type(type_: Any) -> Any:
    if _compat.is_non_null_type(type_):
        type_ = type_.of_type
    return type_.of_type


def response_key(nodes: Any) -> str:
    """The response key of a field (its alias, else its name) from its field nodes (3.3: details)."""
    node = _compat.first_node(nodes)
    key: str = (node.alias or node.name).value
    return key


def levels(info: Any, path: Any) -> list[Any]:
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
    out = [(p, types[depth - i]) for i, p in enumerate(chain)]
    out.append((top, types[0]))
    return out


def locate(root: Any, path: Any) -> Any:
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


class Waiting(NamedTuple):
    """A placeholder waiting for its future, as ``Run.unwatched`` keeps it: these fields, in this
    order, ``ENTRY`` slots in a row of that flat list (no object per entry: see the module notes).

    Exactly one of ``frame`` and ``pending`` is None.  A field of an object
    has its ``frame`` (the object), ``nodes`` and ``return_type``; any other
    placeholder is its ``pending``, the other three None.  ``Run.entries``
    reads a list back as ``Waiting``s; the loop unpacks the slots in this
    order itself.
    """

    future: cf.Future[Any]
    frame: Optional[Frame]
    nodes: Any  # the field's nodes (graphql-core's FieldNodes or 3.3's field details)
    return_type: Any  # the field's GraphQL output type
    pending: Optional[Pending]


#: Slots per entry of ``Run.unwatched`` (a ``Waiting``'s fields).
ENTRY = len(Waiting._fields)


class Run:
    """The state of one execution's root selection set (request thread only).

    A placeholder is *unwatched* (its future has no callback: the loop checks
    it after each step, which is all a loader completed on this thread needs)
    until the loop is about to wait; then it is *watched* (its done-callback
    enqueues it in the scope, waking the loop).
    """

    __slots__ = ("scope", "unwatched", "spare", "watched", "to_dispatch", "parents", "nulled", "root", "root_error",
                 "registry", "seen", "request", "ctx", "as_is", "walking", "resuming", "reused", "__weakref__")

    def __init__(self, context_value: Any, ctx: Any = None) -> None:
        self.ctx = ctx  # the execution context (builds resolve infos again, see pending_of)
        self.scope = Scope(weakref.ref(self))
        # In creation order, the fields of a Waiting per placeholder, ENTRY slots each.
        self.unwatched: list[Any] = []
        # An empty list that becomes ``unwatched`` at the next step of the loop
        # (``_loop.resume_done``), the old one emptied becoming the spare: the
        # same two lists serve the whole execution, so after its first
        # collections the cyclic GC's young collections no longer walk a new
        # list of every waiting field at each step.  Invariant: spare is empty
        # and is not unwatched.
        self.spare: list[Any] = []
        self.watched: dict[Pending, None] = {}
        self.to_dispatch: dict[Any, None] = {}  # loaders reported by the scope, not yet dispatched
        # id(parent path) -> (parent path, container): where placeholders under it live.
        # Cleared whenever a position is nulled (a cached container may be detached).
        self.parents: dict[int, Any] = {}
        self.nulled = False  # a position was nulled: a frame's results may be detached
        self.root: Any = None  # the root data dict, once the root fields have run
        self.root_error: Optional[Exception] = None  # an error that nulled the whole data
        self.registry: Optional[DataLoaderRegistry] = registry_of(context_value)
        self.seen: dict[Any, None] = {}  # every loader that queued keys in this execution
        self.request = request_of(context_value, self)  # "the same request", for _reuse
        self.reused: dict[Any, None] = {}  # loaders this execution used from the cache only (_reuse.on_next_load)
        # return type -> the class of the values its completion writes as they are (_loop._as_is_of), or False
        self.as_is: dict[Any, Any] = {}
        # What the loop is completing, for _levels (the objects a level holds): the entries of the
        # ``unwatched`` list ``resume_done`` walks, and the placeholders the scope reported ready.
        self.walking: list[Any] = []
        self.resuming: list[Pending] = []

    def slot(self, path: Any) -> Any:
        """``(container, key)`` of the value at *path*, or None when it is gone."""
        parent = path.prev
        cached = self.parents.get(id(parent))
        if cached is not None and cached[0] is parent:
            return cached[1], path.key
        found = locate(self.root, path)
        if found is not None:
            self.parents[id(parent)] = (parent, found[0])
        return found

    def watch(self) -> None:
        """Give every unwatched placeholder a done-callback (before the loop waits)."""
        ready, watched = self.scope.ready, self.watched
        unwatched, self.unwatched = self.unwatched, []
        for pending in self.pendings(unwatched):
            watched[pending] = None
            # Runs at once if the future completed meanwhile; otherwise on the
            # completing thread, where it only enqueues.
            pending.future.add_done_callback(functools.partial(ready, pending))

    @staticmethod
    def entries(slots: list[Any]) -> list[Waiting]:
        """The ``Waiting`` entries of *slots* (an ``unwatched`` list), in order: for a reader (a test, a
        debugger); the loop unpacks the slots itself, making no object per entry."""
        it = iter(slots)
        return list(map(Waiting, it, it, it, it, it))

    def pendings(self, slots: list[Any]) -> list[Pending]:
        """The ``Pending`` of each entry of *slots* (an ``unwatched`` list), in order."""
        it = iter(slots)
        return [pending if frame is None else self.pending_of(future, frame, nodes, return_type)
                for future, frame, nodes, return_type, pending in zip(it, it, it, it, it)]  # a Waiting's slots

    def pending_of(self, future: cf.Future[Any], frame: Frame, nodes: Any, return_type: Any) -> Pending:
        """The ``Pending`` of a field entry: its resolve info and path built again (graphql-core's way).

        The info equals the one the resolver received (same field, nodes,
        types, path, context); it is a new object.
        """
        parent_type = frame.type
        path = frame.path.add_key(response_key(nodes), parent_type.name)
        info = _compat.rebuild_info(self.ctx, parent_type, nodes, path)
        return Pending(VALUE, future, frame, return_type, nodes, info, path, frame.rest, None)

    def dispatch(self, loaders: dict[Any, None]) -> None:
        """Dispatch *loaders*: through the registry's ``dispatch_all()`` when there is
        one (its predicates apply; the first call starts a ticker), directly otherwise.
        A loader seen for the first time is checked for reuse across requests (_reuse)."""
        seen = self.seen
        for loader in loaders:
            if loader not in seen:
                seen[loader] = None
                check_reuse(loader, self.request)
        registry = self.registry
        if registry is not None:
            try:
                registry.dispatch_all()
            except Exception:
                _LOGGER.exception("dispatch_all() of %r raised", registry)
            loaders = {loader: None for loader in loaders if not holds(registry, loader)}
        for loader in loaders:
            try:
                loader.dispatch_count()
            except Exception:
                _LOGGER.exception("dispatch of %r raised", loader)

    def sweep(self) -> int:
        """Dispatch keys queued where the scope could not see them; how many were sent."""
        sent = 0
        registry = self.registry
        if registry is not None and registry.dispatch_depth:
            try:
                sent += registry.dispatch_all_with_count()
            except Exception:
                _LOGGER.exception("dispatch_all() of %r raised", registry)
        for loader in self.seen:
            if loader.dispatch_depth and (registry is None or not holds(registry, loader)):
                try:
                    sent += loader.dispatch_count()
                except Exception:
                    _LOGGER.exception("dispatch of %r raised", loader)
        return sent

    def ended(self) -> None:
        """The execution ended: the loads it leaves queued are the ticks' again (see ``wake_ticks``)."""
        scope = self.scope
        scope.dispatches_itself = False
        _, told = scope.take()
        self.to_dispatch.update(told)
        self.wake_ticks()
        watch_for_reuse(self.seen, self.reused)
        early = scope.early_dispatches()
        if early:
            warn_of_early_dispatches(early, self.registry)

    def wake_ticks(self) -> None:
        """Wake the tickers that slept while this execution dispatched its loaders itself.

        Called when it ends, and before it waits (its loaders' predicates may
        have refused keys: a tick asks them again meanwhile).  A ticker-mode
        ``ScheduledDataLoaderRegistry`` stops re-arming while every queued key
        was told to an execution at work (see its ``_tick``): the context's
        registry is woken, and so are those of every loader still holding keys.
        """
        wake_tickers(self.registry, {**self.seen, **self.to_dispatch})

    def clear_loaders(self) -> None:
        """``clear_all()`` every loader of the registry and every loader this execution dispatched."""
        loaders: dict[Any, None] = dict.fromkeys(self.registry.values()) if self.registry is not None else {}
        loaders.update(self.seen)
        for loader in loaders:
            try:
                loader.clear_all()
            except Exception:
                _LOGGER.exception("clear_all() of %r raised", loader)

    def stall_message(self, stall_timeout: Optional[float]) -> str:
        """Why the execution stalled: the loaders still holding keys, or none."""
        waiting: list[Any] = [loader for loader in self.seen if loader.dispatch_depth]
        if self.registry is not None:
            waiting.extend(loader for loader in self.registry.values()
                           if loader.dispatch_depth and loader not in self.seen)
        described = ", ".join(f"{loader.name or repr(loader)} ({loader.dispatch_depth} keys)" for loader in waiting)
        why = (f"keys queued but never dispatched: {described} (a dispatch predicate kept refusing them)"
               if waiting else "no loader has queued keys: the futures are pending elsewhere"
               " (an executor, or a future nobody completes)")
        count = len(self.watched) + len(self.unwatched) // ENTRY
        return f"no progress for {stall_timeout} s with {count} field(s) still waiting; {why}"


def warn_of_early_dispatches(early: dict[Any, int], registry: Optional[DataLoaderRegistry]) -> None:
    """Log one WARNING naming the loaders that resolvers' ``result()`` split into several batches.

    A single early batch of a loader (a root resolver blocking once) costs
    nothing and is not reported; two or more are the N+1 pattern coming back
    through ``.result()``.
    """
    split = {loader: count for loader, count in early.items() if count > 1}
    if not split:
        return
    names = {loader: name for name, loader in registry.items()} if registry is not None else {}

    def label(loader: Any) -> str:
        name = loader.name or names.get(loader)
        return f"DataLoader {name!r}" if name else repr(loader)

    described = ", ".join(f"{label(loader)} ({count} batches)" for loader, count in split.items())
    _LOGGER.warning(
        "one batch per key: resolvers blocked on loads with .result() inside this GraphQL execution, and each "
        "wait sent its loader's batch early: %s. Return the future from the resolver "
        "(return loader.load(key), or loader.load(key).then(...)) to keep one batch per loader per level",
        described,
    )
