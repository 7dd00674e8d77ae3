"""Outside check: Pinry's REST API (Django REST framework), ported, under four variants; SQL statements per request.

    python tools/outside_check_rest.py [--quick] [--scale S] [--seed N] [--endpoint NAME [--sql]] [--diff]
                                       [--json PATH]

The models, serializers and views are Pinry's (``tools/outside_rest/``: upstream repository, commit and files
in its docstring): viewsets whose ``get_queryset`` does its own ``select_related`` (``filter_private_pin``),
nested serializers two levels deep (pin -> image -> thumbnails, pin -> submitter), a ``SlugRelatedField``
over ``source="tag_list"`` (a model method returning django-taggit's ``self.tags.all()``),
``SerializerMethodField``s that count a filtered relation (``instance.pins.all()`` through ``exclude`` and
``select_related``, then ``.count()``) and serialize ``instance.pins.first()`` with a serializer made inside
the method, model properties that query ``Thumbnail.objects`` per image, hyperlinks, django-filter,
limit/offset pagination and ``cache_page``.  Django is configured in-process on SQLite in memory (REST
framework settings as upstream's, Django's dummy cache), filled by ``outside_rest.fixtures`` (``--scale``: 1 is
~2,700 rows; ``--quick`` is 0.25, ~700; ``--seed``).

Each request of ``outside_rest.endpoints`` (the single-page app's: ten reads and two writes) goes through REST
framework's test client (``APIClient``, signed in with ``force_authenticate`` where the page is a user's) once
per variant, each with URL routes of its own over its own view classes; a write runs in a transaction rolled
back afterwards, so that every variant starts from the same rows, and its answer is its response body with
the rows it left (boards, their pins, pins, their tags):

- ``off``: the views as written;
- ``switch``: each viewset with ``dataloader_sync.rest_framework.AutoRelationsMixin`` first in its bases;
- ``serializer-prefetch``: each viewset's serializer with drf-serializer-prefetch's
  ``PrefetchingSerializerMixin`` first in its bases (the package ``serializer_prefetch``);
- ``auto-prefetching``: each viewset with django-auto-prefetching's ``AutoPrefetchViewSetMixin`` first
  (the package ``django_auto_prefetching``).

The two planners are not dependencies of the project: a variant whose package is missing is skipped, and the
output names it.  The table: the statements each variant sends (Django's ``CaptureQueriesContext``; the
content-type cache is warmed first), and whether every variant's answer is byte-identical to off's.
``ERR`` marks a variant that raised or answered a status other than 200 or 201; ``--diff`` prints where an
answer differs, ``--sql`` (with ``--endpoint``) every statement.  Exit status 1 if the switch's answer
differs from off's, or off or the switch errs.  A planner's error or different answer is the planner's (they plan from
the declarations, and a property or method behind a ``source`` is not a relation they can prefetch): shown in
the table and by ``--diff``, not failed.
"""
from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import sys
import textwrap
import time
from typing import Any, Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("off", "switch", "serializer-prefetch", "auto-prefetching")
PACKAGES = {"serializer-prefetch": ("serializer_prefetch", "drf-serializer-prefetch"),
            "auto-prefetching": ("django_auto_prefetching", "django-auto-prefetching")}
LEGEND = ("yes: every variant's answer (a write's: its response and the rows it left) is byte-identical to off's.  "
          "NO: a variant's differs (who answers alike in brackets).  ERR: the variant raised, or answered a status "
          "other than 200 or 201.  The run fails when the switch's answer differs from off's or either errs; the "
          "planners' failures are reported, not failed.")


def setup_django(strict: bool = False) -> None:
    """Django with ``outside_rest`` (found in tools/) on SQLite in memory, Pinry's REST framework settings;
    *strict*: with REST framework's test mode on (``DATALOADER_SYNC_REST_FRAMEWORK_STRICT``)."""
    import django
    from django.conf import settings

    sys.path.insert(0, os.path.join(ROOT, "tools"))
    sys.path.insert(0, ROOT)
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "rest_framework",
                        "rest_framework.authtoken", "django_filters", "taggit", "outside_rest"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        USE_TZ=True,
        SECRET_KEY="outside-check",
        ROOT_URLCONF="outside_rest.urls",
        MIDDLEWARE=[],
        MEDIA_URL="/media/",
        ALLOWED_HOSTS=["testserver"],
        CACHES={"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}},
        # every app's tables made from its models (the proxy of auth.User needs auth's state)
        MIGRATION_MODULES=dict.fromkeys(("auth", "contenttypes", "authtoken", "taggit", "outside_rest")),
        ALLOW_NEW_REGISTRATIONS=True,
        DATALOADER_SYNC_REST_FRAMEWORK_STRICT=strict,
        DRF_URL_FIELD_NAME="resource_link",
        # pinry/settings/base.py's, less DEFAULT_SCHEMA_CLASS (coreapi, for the docs page only)
        REST_FRAMEWORK={
            'DEFAULT_PERMISSION_CLASSES': ['rest_framework.permissions.IsAuthenticatedOrReadOnly'],
            'DEFAULT_FILTER_BACKENDS': ('django_filters.rest_framework.DjangoFilterBackend',),
            'URL_FIELD_NAME': "resource_link",
            'DEFAULT_PAGINATION_CLASS': 'rest_framework.pagination.LimitOffsetPagination',
            'PAGE_SIZE': 50,
            'DEFAULT_AUTHENTICATION_CLASSES': [
                'rest_framework.authentication.BasicAuthentication',
                'rest_framework.authentication.TokenAuthentication',
                'rest_framework.authentication.SessionAuthentication',
            ],
        },
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", run_syncdb=True, verbosity=0)


def available() -> tuple[list[str], dict[str, str]]:
    """The variants that can run here, and why the others cannot."""
    missing = {variant: f"{dist} is not installed" for variant, (module, dist) in PACKAGES.items()
               if importlib.util.find_spec(module) is None}
    return [v for v in VARIANTS if v not in missing], missing


def variant_views(variant: str) -> dict[str, type]:
    """Pinry's viewsets, as *variant* runs them."""
    from outside_rest.views import VIEWSETS

    def first(mixin: type) -> dict[str, type]:
        return {key: type(view.__name__, (mixin, view), {"__module__": view.__module__})
                for key, view in VIEWSETS.items()}

    if variant == "off":
        return dict(VIEWSETS)
    if variant == "switch":
        from dataloader_sync.rest_framework import AutoRelationsMixin

        return first(AutoRelationsMixin)
    if variant == "auto-prefetching":
        from django_auto_prefetching import AutoPrefetchViewSetMixin

        return first(AutoPrefetchViewSetMixin)
    if variant == "serializer-prefetch":
        from serializer_prefetch import PrefetchingSerializerMixin

        views = {}
        for key, view in VIEWSETS.items():
            serializer = view.serializer_class
            planned = type(serializer.__name__, (PrefetchingSerializerMixin, serializer),
                           {"__module__": serializer.__module__})
            views[key] = type(view.__name__, (view,), {"__module__": view.__module__, "serializer_class": planned})
        return views
    raise ValueError(f"unknown variant {variant!r}")


def state() -> str:
    """What a write can change that a response may not show: boards, their pins, pins and their tags."""
    from outside_rest import models

    return json.dumps({
        "boards": list(models.Board.objects.order_by("id").values_list("id", "name", "private")),
        "board pins": sorted(models.Board.pins.through.objects.values_list("board_id", "pin_id")),
        "pins": list(models.Pin.objects.order_by("id").values_list("id", "description", "private", "image_id")),
        "tags": sorted(models.Pin.tags.through.objects.values_list("object_id", "tag__name")),
    })


def request(urlconf: Any, call: tuple[Any, ...]) -> tuple[int, str, Optional[str], list[str]]:
    """(statements, answer, error or None, the statements' SQL) of one request through the test client.

    *call* is ``(path, username)`` for a GET, ``(path, username, method, data)`` for a write; a write runs
    in a transaction rolled back afterwards (every variant starts from the same rows), and its answer is
    the response body with the rows it left (``state()``)."""
    from django.contrib.auth.models import User
    from django.db import connection, transaction
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    path, username = call[:2]
    method, data = call[2:] if len(call) == 4 else ("get", None)
    client = APIClient()
    if username is not None:
        client.force_authenticate(User.objects.get(username=username))
    error: Optional[str] = None
    with transaction.atomic():
        with override_settings(ROOT_URLCONF=urlconf), CaptureQueriesContext(connection) as queries:
            try:
                response = getattr(client, method)(path, data, format="json") if data is not None else \
                    client.get(path)
                body = response.content.decode()
                if response.status_code not in (200, 201):
                    error = f"status {response.status_code}: {body[:200]}"
            except Exception as exc:  # a crash is a finding: recorded, not raised
                body = json.dumps({"crash": f"{type(exc).__name__}: {exc}"})
                error = f"{type(exc).__name__}: {exc}"
        if method != "get":
            body = json.dumps({"response": body, "after": json.loads(state())})
        transaction.set_rollback(True)
    sql = [q["sql"] for q in queries.captured_queries]
    return len(sql), body, error, sql


def check(variants: list[str], requests: dict[str, tuple[Any, ...]], only: Optional[str]) -> list[dict[str, Any]]:
    """One row per request: each variant's statements, answer and error."""
    from outside_rest.urls import urlconf_for

    urlconfs = {v: urlconf_for(variant_views(v), v.replace("-", "_")) for v in variants}
    rows = []
    for name, call in requests.items():
        if only and only != name:
            continue
        row: dict[str, Any] = {"endpoint": name, "request": list(call)}
        for variant in variants:
            measured = request(urlconfs[variant], call)
            row[variant] = dict(zip(("statements", "body", "error", "sql"), measured))
        rows.append(row)
    return rows


def verdict(row: dict[str, Any], variants: list[str]) -> str:
    """"yes" (every body byte-identical to off's), else "NO" and who answers alike."""
    groups: dict[str, list[str]] = {}
    for variant in variants:
        groups.setdefault(row[variant]["body"], []).append(variant)
    if len(groups) == 1:
        return "yes"
    return "NO (" + " | ".join("=".join(group) for group in groups.values()) + ")"


def passed(row: dict[str, Any], variants: list[str]) -> bool:
    """Every body identical to off's, no variant erring."""
    return verdict(row, variants) == "yes" and not any(row[v]["error"] for v in variants)


def switch_passed(row: dict[str, Any]) -> bool:
    """The switch's body identical to off's, neither erring: what the exit status is about."""
    return row["switch"]["body"] == row["off"]["body"] and not (row["off"]["error"] or row["switch"]["error"])


def table(rows: list[dict[str, Any]], variants: list[str]) -> str:
    head = ["endpoint", *variants, "answers identical"]
    body = [[row["endpoint"], *(("ERR " if row[v]["error"] else "") + str(row[v]["statements"]) for v in variants),
             verdict(row, variants)] for row in rows]
    def total(variant: str) -> str:   # a sum over the rows a variant answered, else how many it erred on
        erred = sum(bool(row[variant]["error"]) for row in rows)
        return f"{erred} ERR" if erred else str(sum(row[variant]["statements"] for row in rows))

    totals = [total(v) for v in variants]
    passing = sum(passed(r, variants) for r in rows)
    switch = sum(map(switch_passed, rows))
    body.append(["total", *totals, f"{passing}/{len(rows)} all identical, switch {switch}/{len(rows)}"])
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]

    def fmt(line: list[str]) -> str:
        return " | ".join(cell.ljust(w) if i in (0, len(line) - 1) else cell.rjust(w)
                          for i, (cell, w) in enumerate(zip(line, widths))).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([fmt(head), rule, *map(fmt, body[:-1]), rule, fmt(body[-1])])


def diffs(rows: list[dict[str, Any]], variants: list[str], out: Callable[[str], None]) -> None:
    """Where each variant's body differs from off's (pretty JSON, unified diff), and each error."""
    def pretty(body: str) -> list[str]:
        try:
            return json.dumps(json.loads(body), indent=1).splitlines()
        except ValueError:
            return body.splitlines()

    for row in rows:
        base = pretty(row["off"]["body"])
        for variant in variants[1:]:
            if row[variant]["body"] != row["off"]["body"]:
                out(f"--- {row['endpoint']}: off vs {variant}")
                out("\n".join(list(difflib.unified_diff(base, pretty(row[variant]["body"]), "off", variant, n=2,
                                                        lineterm=""))[:80]))
        for variant in variants:
            if row[variant]["error"]:
                out(f"!!! {row['endpoint']} [{variant}]: {row[variant]['error']}")


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a small data set (scale 0.25)")
    p.add_argument("--scale", type=float, default=1.0, help="data set size (1: ~2,700 rows)")
    p.add_argument("--seed", type=int, default=41, help="the data set's random seed")
    p.add_argument("--endpoint", help="run only this request (a name in the table)")
    p.add_argument("--diff", action="store_true", help="print where answers differ from off's, and the errors")
    p.add_argument("--sql", action="store_true", help="print each variant's statements (with --endpoint)")
    p.add_argument("--strict", action="store_true",
                   help="with the test mode on (DATALOADER_SYNC_REST_FRAMEWORK_STRICT): a statement run once per "
                        "row errs the switch's request (with --diff: which statement)")
    p.add_argument("--json", metavar="PATH", help="also write the rows (counts, bodies, errors) as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.scale = 0.25
    if args.scale <= 0:
        p.error("--scale must be positive")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    setup_django(args.strict)
    from django.contrib.contenttypes.models import ContentType
    from outside_rest import fixtures, models
    from outside_rest.endpoints import endpoints

    started = time.perf_counter()
    counts = fixtures.populate(args.scale, args.seed)
    requests = endpoints()
    if args.endpoint and args.endpoint not in requests:
        print(f"--endpoint: unknown request {args.endpoint!r}; the requests: {', '.join(requests)}",
              file=sys.stderr)
        return 2
    ContentType.objects.get_for_models(models.Pin, models.Board, models.User, models.Image, models.Thumbnail)
    variants, missing = available()
    rows = check(variants, requests, args.endpoint)
    print(f"Pinry (ported), {sum(counts.values())} rows (scale {args.scale:g}, seed {args.seed});"
          " SQL statements per request:\n")
    print(table(rows, variants))
    for variant, why in missing.items():
        print(f"\nskipped: {variant} ({why})")
    if args.diff:
        print()
        diffs(rows, variants, print)
    if args.sql:
        for row in rows:
            for variant in variants:
                print(f"\n=== {row['endpoint']} [{variant}]: {row[variant]['statements']} statements")
                print("\n".join(row[variant]["sql"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"scale": args.scale, "variants": variants, "skipped": missing, "rows": rows}, out, indent=1)
    failed = not all(map(switch_passed, rows))
    outcome = "FAILED: the switch answers otherwise, or erred" if failed else "passed"
    print("\n" + textwrap.fill(LEGEND, 116) + f"\n{outcome} ({time.perf_counter() - started:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
