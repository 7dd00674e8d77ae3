"""Which session a batch runs in, and on which thread it may.

A ``Session`` is not thread-safe: two threads must never use one at once.
The request thread uses its session between the loads it makes; a batch
that runs on another thread (a tick of a ticker-mode registry, a loader's
``executor=``) would use that session concurrently.  So:

- ``session=None`` (the instances' own session), a ``Session`` or a
  ``scoped_session`` (Flask-SQLAlchemy's ``db.session``; resolved on the
  thread that runs the batch): the batch runs in that session, and only on
  the thread that began the session's current transaction (the thread that
  loaded the parents, in practice).  On any other thread it fails its keys
  with a ``RuntimeError`` that says so, before touching the session.
- ``session=`` a ``sessionmaker``: each batch opens a session of its own,
  runs its query there and closes it (its connection goes back to the
  pool), so it may run on any thread.  The instances it returns are
  detached, and it sees what a new transaction sees (not the request's
  uncommitted writes).

The owning thread is recorded by an ``after_begin`` listener on
``sqlalchemy.orm.Session`` (installed when this package is imported) in
``session.info["dataloader_sync.thread"]``: the thread ident that began the
session's latest transaction.  It stays after the transaction ends (so a
batch on another thread cannot slip in between two of the request's
transactions); a session that never began a transaction has no owner yet.
"""
from __future__ import annotations

import threading
from typing import Any, Optional, Union

from sqlalchemy import event
from sqlalchemy.orm import Session, scoped_session, sessionmaker

__all__ = ["SessionArgument", "check_session", "check_thread", "is_factory", "resolve"]

#: What ``session=`` accepts.
SessionArgument = Union[None, Session, "scoped_session[Any]", "sessionmaker[Any]"]

#: The key of ``session.info`` that holds the owning thread's ident.
OWNER_KEY = "dataloader_sync.thread"


@event.listens_for(Session, "after_begin")
def _record_owner(session: Session, transaction: Any, connection: Any) -> None:
    session.info[OWNER_KEY] = threading.get_ident()


def check_session(session: Any, parameter: str = "session", *, required: bool = False) -> None:
    """Raise at once for a ``session=`` argument of the wrong type.

    Raises:
        TypeError: *session* is not None, a ``Session``, a ``scoped_session``
            or a ``sessionmaker`` (or is None where *required*).
    """
    if session is None and not required:
        return
    if not isinstance(session, (Session, scoped_session, sessionmaker)):
        expected = "a Session, a scoped_session or a sessionmaker"
        raise TypeError(f"{parameter} must be {expected}{'' if required else ' or None'}, got {session!r}")


def is_factory(session: Any) -> bool:
    """True when each batch opens its own session (``session=`` a ``sessionmaker``)."""
    return isinstance(session, sessionmaker)


def resolve(session: Any) -> Optional[Session]:
    """The ``Session`` a batch uses for *session* (``None``: the instances' own; a factory is not resolved)."""
    if isinstance(session, scoped_session):
        resolved: Session = session()
        return resolved
    if isinstance(session, Session):
        return session
    return None


def check_thread(session: Session, loader: str) -> None:
    """Raise when this thread did not begin *session*'s transaction (see the module).

    Raises:
        RuntimeError: another thread owns *session*.
    """
    owner = session.info.get(OWNER_KEY)
    if owner is not None and owner != threading.get_ident():
        raise RuntimeError(
            f"{loader}: the session is in use by thread {owner} and a Session is not thread-safe, "
            f"so this batch (on thread {threading.get_ident()}) does not run in it; dispatch SQLAlchemy "
            "loaders on the thread that uses the session (no ticker mode, no executor=), or pass "
            "session=sessionmaker(...) so that each batch opens a session of its own"
        )
