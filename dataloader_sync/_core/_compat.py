"""CPython's private names the package reads (``concurrent.futures``, ``asyncio``, frames), in one place.

The one wall between the package and the standard library's internals: no
other module reads a private name of ``concurrent.futures``, ``asyncio`` or
``sys`` (``tests/test_package_structure.py`` checks it), and each name here
is verified against the running interpreter when this module is imported, or
looked up with a fallback to the public path where one exists.
``tests/test_compat.py`` pins each to the CPython versions CI installs
(3.9–3.13).

- ``concurrent.futures._base``'s states (``PENDING`` ... ``FINISHED``): a
  ``Future`` of this package *is* a ``concurrent.futures.Future``, and
  ``concurrent.futures.wait``/``as_completed`` read its ``_state`` against
  them.  No public path gives them; checked at import against a standard
  future moved through each state by its public methods.
- ``FUTURE_FIELDS``: the standard ``Future``'s private fields that
  ``dataloader_sync.Future`` keeps in the standard layout (``wait`` and
  ``as_completed`` reach for ``_condition``, ``_waiters``, ``_state``), and
  that the hot paths read directly (a read through a function costs a call
  per load): the names, checked at import against a standard future.
- ``running_loop()`` / ``loop_getter()``: asyncio's ``_get_running_loop``
  (the running loop or None, without the ``RuntimeError`` of the public
  ``get_running_loop``); falls back to the public one.
- ``getframe``: ``sys._getframe`` (a caller's module and code flags, in
  ``Future.__await__``/``__str__``/``__class__``); falls back to
  ``inspect.currentframe`` walked back.
- ``chain_callback_code()``: the code of the callback
  ``asyncio.wrap_future`` puts on a future (``asyncio.futures._chain_future``'s
  ``_call_set_state``), recognised by its code object; None where asyncio has
  none (then ``wrap_future`` of a pending future is not dispatched by the
  loop's batching point, only by whoever dispatches the loader).
"""
from __future__ import annotations

import concurrent.futures as cf
import inspect
import sys
import types
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING, RUNNING
from typing import Any, Callable, Optional

__all__ = ["CANCELLED", "CANCELLED_AND_NOTIFIED", "CHAIN_CALLBACK_NAME", "FINISHED", "FUTURE_FIELDS", "PENDING",
           "RUNNING", "chain_callback_code", "getframe", "loop_getter", "public_getframe", "public_running_loop",
           "running_loop"]

#: The standard ``Future``'s private fields kept in its layout by ``dataloader_sync.Future`` and read
#: directly on the hot paths (the package's ``Future`` makes ``_condition`` and ``_waiters`` on demand).
FUTURE_FIELDS = ("_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks")

#: The name of the callback ``asyncio.wrap_future`` registers (``_chain_future``'s inner function).
CHAIN_CALLBACK_NAME = "_call_set_state"


def _check_futures() -> None:
    """The states and fields above are the running CPython's, or a clear error at import."""
    fut: cf.Future[Any] = cf.Future()
    fields = vars(fut)
    seen = [fut._state]
    fut.set_running_or_notify_cancel()
    seen.append(fut._state)
    fut.set_result(None)
    seen.append(fut._state)
    cancelled: cf.Future[Any] = cf.Future()
    cancelled.cancel()
    seen.append(cancelled._state)
    cancelled.set_running_or_notify_cancel()
    seen.append(cancelled._state)
    missing = [name for name in FUTURE_FIELDS if name not in fields]
    if seen != [PENDING, RUNNING, FINISHED, CANCELLED, CANCELLED_AND_NOTIFIED] or missing:
        raise ImportError(
            f"dataloader_sync does not support this concurrent.futures (CPython {sys.version.split()[0]}): its"
            f" Future's states are {seen}, its fields lack {missing}; dataloader_sync supports CPython 3.9-3.13")


_check_futures()


# -- asyncio's running loop ---------------------------------------------------------------------
def public_running_loop() -> Any:
    """The running asyncio loop or None, by the public ``asyncio.get_running_loop`` (the fallback)."""
    import asyncio
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def loop_getter() -> Callable[[], Any]:
    """asyncio's ``_get_running_loop`` (imports asyncio), else ``public_running_loop``: bind it once, call it often."""
    import asyncio
    found: Optional[Callable[[], Any]] = getattr(asyncio, "_get_running_loop", None)
    return public_running_loop if found is None else found


def running_loop() -> Any:
    """The asyncio loop running in this thread, or None (without importing asyncio: no import, no loop)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio._get_running_loop()
    except AttributeError:  # an asyncio without it
        return public_running_loop()


# -- frames -----------------------------------------------------------------------------------------
def public_getframe(depth: int = 0) -> Any:
    """``sys._getframe(depth)`` of the caller, by ``inspect.currentframe`` (the fallback)."""
    frame = inspect.currentframe()
    frame = None if frame is None else frame.f_back  # the caller's
    for _ in range(depth):
        if frame is None:
            raise ValueError("call stack is not deep enough")
        frame = frame.f_back
    if frame is None:
        raise ValueError("call stack is not deep enough")
    return frame


#: ``getframe(depth)``: the frame *depth* calls above its caller (``sys._getframe``, a C function: no frame
#: of its own), else ``public_getframe``.
getframe: Callable[[int], Any] = getattr(sys, "_getframe", public_getframe)


# -- asyncio.wrap_future's callback -------------------------------------------------------------
def chain_callback_code() -> Any:
    """The code of ``asyncio.futures._chain_future``'s ``_call_set_state`` (None if asyncio has none).

    Looked up once asyncio is imported (never imports it), then remembered.
    """
    global _CHAIN_CODE
    if _CHAIN_CODE is _UNKNOWN:
        futures = sys.modules.get("asyncio.futures")
        if futures is None:
            return None
        chain = getattr(futures, "_chain_future", None)
        consts = getattr(getattr(chain, "__code__", None), "co_consts", ())
        _CHAIN_CODE = next((c for c in consts if isinstance(c, types.CodeType) and c.co_name == CHAIN_CALLBACK_NAME),
                           None)
    return _CHAIN_CODE


_UNKNOWN: Any = object()
_CHAIN_CODE: Any = _UNKNOWN
