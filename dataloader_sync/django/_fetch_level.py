"""``FETCH_LEVEL``: a Django fetch mode (Django >= 6.1) whose peers are the instances of the execution's level.

Django 6.1 reads a field an instance does not hold (a to-one relation not
cached, a deferred column) through the instance's *fetch mode*
(``QuerySet.fetch_mode()``): ``FETCH_ONE`` reads it for that instance,
``FETCH_PEERS`` for every instance the same queryset returned.  During a
GraphQL execution the instances one custom resolver or ``@property`` runs
on come from many querysets: a level of the execution is loaded by several
batches (several loaders, several parents' querysets, a list built from
several querysets).  ``FETCH_LEVEL`` reads the field for every instance of
the same level that the execution holds — its ``LevelSource``
(``dataloader_sync._execution_levels``, the execution's ``Levels``) says
which — plus the queryset's own peers, in one statement
(``fetcher.fetch_many``, Django's own batch read, as ``FETCH_PEERS`` does).

It is Django's documented custom-fetch-mode hook: a ``FetchPeers``
subclass overriding ``fetch(fetcher, instance)``.

Outside an execution (a view, a template, a management command, a batch on
an executor thread) it is ``FETCH_PEERS``: the instances still came from one
queryset, and reading the field for all of them is what the user who chose
``FETCH_LEVEL`` wanted anyway; ``FETCH_ONE`` would bring the N+1 back there.

Who takes part: instances whose fetch mode is ``FETCH_LEVEL`` (the auto
relations' querysets apply it, see ``_auto.level_queryset``; users'
querysets opt in with ``.fetch_mode(FETCH_LEVEL)``), of the instance's own
class and database.

Guarantees:
- The level is the current execution's (a context variable): one request's
  instances are never read with another's.  No lock: it runs on the
  thread that reads the field.
- Picklable as the singleton it is (``__reduce__``), as Django's modes are.

Importing this module needs Django >= 6.1 (``django.db.models.fetch_modes``);
``dataloader_sync.django`` imports it on first use of ``FETCH_LEVEL``.
"""
from __future__ import annotations

from typing import Any

from django.db.models.fetch_modes import FetchPeers

from .._execution_levels import current_levels

__all__ = ["FETCH_LEVEL", "FetchLevel"]


class FetchLevel(FetchPeers):  # type: ignore[misc]
    """Fetch the missing field for every instance of the running execution's level (module notes).

    Thread-safe: stateless; the level is the calling context's.
    """

    __slots__ = ()

    def fetch(self, fetcher: Any, instance: Any) -> None:
        source = current_levels()
        held = source.peers_of(instance) if source is not None else None
        if held is None:  # outside an execution, or not at a level it can see
            super().fetch(fetcher, instance)
            return
        cls, db = instance.__class__, instance._state.db
        seen = {id(instance)}
        instances = [instance]
        own = [peer for ref in instance._state.peers if (peer := ref()) is not None]  # FETCH_PEERS's
        for one in (*held, *own):
            if (one.__class__ is cls and id(one) not in seen and one._state.fetch_mode is self
                    and one._state.db == db):
                seen.add(id(one))
                instances.append(one)
        if len(instances) > 1:
            fetcher.fetch_many(instances)
        else:
            fetcher.fetch_one(instance)

    def __reduce__(self) -> str:
        return "FETCH_LEVEL"

    def __repr__(self) -> str:
        return "FETCH_LEVEL"


FETCH_LEVEL = FetchLevel()
