"""The levels of one execution: the objects at one depth that it holds, for ``FETCH_LEVEL``.

``DataLoaderExecutionContext`` makes a ``Levels`` the current
``LevelSource`` (``dataloader_sync._execution_levels``) while its root
selection set runs.  A reader (``dataloader_sync.django.FETCH_LEVEL``) asks it,
from inside a resolver, for the objects of the same level as the one it
reads: the objects at the depth of the object whose field is being resolved
(``ctx._frame``; the depth below it for a ``resolve_type`` or ``is_type_of``
reading the object being typed).

What the execution holds at a depth, the moment it is asked:

- the plain lists being completed there (a resolver's list: its items,
  before the first of them is completed — ``lists``, pushed by
  ``DataLoaderExecutionContext.complete_value``);
- the values of the loaders' futures that are done and wait for the loop to
  complete them there (the entries ``_loop.resume_done`` walks, the
  placeholders the scope reported ready, the others still waiting): a level
  loaded by several batches — several loaders, several querysets, several
  parents' batches — is one level as soon as its batches are back;
- objects already completed are not kept: their fields have run.

The execution is depth-first within a value and breadth-first across the
loop's steps, so the objects of a level that later steps will load (a
resolver of the next parent calling a queryset of its own) are not there
yet: they make a level of their own when their turn comes.

Guarantees:
- Asked from another thread than the execution's (a batch on an executor
  that copied the context), it answers None: the loop's state is read on
  the request thread only.
- It keeps no object beyond the execution: it reads the loop's state when
  asked, and its list stack empties as each list is completed.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Callable, Optional

from .._core import FINISHED
from ._run import ENTRY, VALUE, Frame, Pending, Run

__all__ = ["Levels"]


class Levels:
    """One execution's ``LevelSource`` (request thread only; see the module notes)."""

    __slots__ = ("ctx", "run", "thread", "lists", "__weakref__")

    def __init__(self, ctx: Any, run: Run) -> None:
        self.ctx = ctx  # its _frame: the object whose fields are being resolved
        self.run = run
        self.thread = threading.get_ident()
        # (enclosing frame, items) of each plain list value being completed, innermost last
        self.lists: list[tuple[Optional[Frame], list[Any]]] = []

    def peers_of(self, obj: Any) -> Optional[list[Any]]:
        """The objects of *obj*'s level the execution holds (*obj* among them), or None (module notes)."""
        for held in self._levels():
            for one in held:
                if one is obj:
                    return held
        return None

    def find(self, match: Callable[[Any], bool]) -> Any:
        """An object of the level of the object whose field is being resolved (or of the level below it,
        as ``peers_of``) for which *match* is true, or None."""
        for held in self._levels():
            for one in held:
                if match(one):
                    return one
        return None

    def _levels(self) -> Iterator[list[Any]]:
        """The objects held at the level of the object whose field is being resolved, then at the level
        below it; nothing on another thread than the execution's, nor at the root value's."""
        if threading.get_ident() != self.thread:
            return
        depths: dict[int, int] = {}
        depth = _depth(self.ctx._frame, depths)
        for level in (depth, depth + 1):
            if level:
                yield self._held(level, depths)

    def _held(self, level: int, depths: dict[int, int]) -> list[Any]:
        """The objects at depth *level* that the execution holds (module notes): may repeat an object."""
        above = level - 1  # the depth of the object whose field holds them
        held: list[Any] = []
        for frame, items in self.lists:
            if _depth(frame, depths) == above:
                held += items
        run = self.run
        for entries in (run.walking, run.unwatched):
            it = iter(entries)
            for future, frame, _, _, pending in zip(it, it, it, it, it):  # a Waiting's slots (_run)
                if frame is None:
                    _add_pending(held, pending, above, depths)
                elif future._state is FINISHED and future._exception is None and _depth(frame, depths) == above:
                    _add(held, future._result)
        for pending in (*run.resuming, *run.watched):
            _add_pending(held, pending, above, depths)
        return held


assert ENTRY == 5, "Levels._held reads unwatched entries five slots at a time (a Waiting's)"


def _add_pending(held: list[Any], pending: Pending, above: int, depths: dict[int, int]) -> None:
    if _depth(pending.frame, depths) != above:
        return
    if pending.kind != VALUE:  # resolve_type / is_type_of: the object being typed
        held.append(pending.source)
        return
    future = pending.future
    if future._state is FINISHED and future._exception is None:
        _add(held, future._result)


def _add(held: list[Any], value: Any) -> None:
    if isinstance(value, (list, tuple)):
        held += value
    elif value is not None:
        held.append(value)


def _depth(frame: Optional[Frame], depths: dict[int, int]) -> int:
    """How many objects enclose *frame*'s, itself included (0 for None, the root), memoized in *depths*."""
    if frame is None:
        return 0
    known = depths.get(id(frame))
    if known is not None:
        return known
    chain = []
    while frame is not None and id(frame) not in depths:
        chain.append(frame)
        frame = frame.parent
    depth = 0 if frame is None else depths[id(frame)]
    for one in reversed(chain):
        depth += 1
        depths[id(one)] = depth
    return depth
