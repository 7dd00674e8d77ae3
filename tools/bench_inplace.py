"""What the in-place seam (``dataloader_sync.django._inplace``) adds to Django's ``QuerySet`` outside an execution.

``python tools/bench_inplace.py`` prints ns per call of ``count()``, ``exists()`` and ``len()``
on an evaluated queryset (no statement: the figure is the Python around it), of ``iterator()`` (which
returns its generator before any statement), of ``ForwardManyToOneDescriptor.get_object`` (what a
to-one read that misses its cache runs, before its statement; measured on a stand-in that returns at
once, so the figure is the wrapper's Python), and of a reverse foreign key's related manager's
``all()`` (``content_type.permission_set.all()``, its ``get_queryset`` and ``_apply_rel_filters``,
which ``_manager_querysets.watch`` wraps for the relations an execution met), with
Django's own methods and with the seam's wrappers, and the difference.  Best of 5 repeats, cyclic
GC off (``bench_micro.best_of``).  A report, not a test.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import django
from django.conf import settings

settings.configure(INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"],
                   DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}})
django.setup()

from bench_micro import best_of, per_op  # noqa: E402
from django.contrib.contenttypes.models import ContentType  # noqa: E402
from django.db.models import QuerySet  # noqa: E402

from dataloader_sync.django import _inplace  # noqa: E402

NUMBER = 200_000


def _cases(queryset: QuerySet[Any]) -> dict[str, Callable[[], object]]:
    return {"count()": queryset.count, "exists()": queryset.exists, "len()": queryset.__len__,
            "iterator()": queryset.iterator}


def main() -> None:
    queryset = ContentType.objects.all()
    queryset._result_cache = []  # evaluated: no statement, the methods' Python only
    queryset._prefetch_done = True
    _inplace.install()
    own = {name: getattr(QuerySet, name) for name in _inplace._installed}
    originals = _inplace._installed
    for label, call in _cases(queryset).items():
        wrapped = best_of(5, per_op(call, NUMBER))
        for name, method in originals.items():
            setattr(QuerySet, name, method)
        try:
            plain = best_of(5, per_op(_cases(queryset)[label], NUMBER))
        finally:
            for name, method in own.items():
                setattr(QuerySet, name, method)
        print(f"{label:10} Django {plain * 1e9:7.1f} ns  with the seam {wrapped * 1e9:7.1f} ns  "
              f"added {(wrapped - plain) * 1e9:6.1f} ns")

    def get_object(descriptor: Any, instance: Any) -> Any:  # Django's runs a statement next: a stand-in
        return instance

    wrapper = _inplace._wrap_get_object(get_object)
    descriptor, instance = object(), ContentType()
    wrapped = best_of(5, per_op(lambda: wrapper(descriptor, instance), NUMBER))
    plain = best_of(5, per_op(lambda: get_object(descriptor, instance), NUMBER))
    print(f"{'get_object':10} Django {plain * 1e9:7.1f} ns  with the seam {wrapped * 1e9:7.1f} ns  "
          f"added {(wrapped - plain) * 1e9:6.1f} ns  (then a statement)")

    from django.contrib.auth.models import Permission

    from dataloader_sync.django import _manager_querysets

    field = Permission._meta.get_field("content_type")
    manager = ContentType(pk=1).permission_set
    cls = type(manager)
    own_methods = {name: cls.__dict__[name] for name in ("get_queryset", "_apply_rel_filters")}
    plain = best_of(5, per_op(manager.all, NUMBER // 10))
    _manager_querysets.watch(field)
    try:
        wrapped = best_of(5, per_op(manager.all, NUMBER // 10))
    finally:
        for name, method in own_methods.items():
            setattr(cls, name, method)
    print(f"{'manager':10} Django {plain * 1e9:7.1f} ns  with the seam {wrapped * 1e9:7.1f} ns  "
          f"added {(wrapped - plain) * 1e9:6.1f} ns  (related manager all(); builds no query yet)")


if __name__ == "__main__":
    main()
