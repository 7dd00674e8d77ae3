"""What the Django benchmarks share (``tools/bench_orm.py``, ``tools/bench_auto.py``).

Django configured in-process on SQLite in memory or on a PostgreSQL server
started for the run (``--postgres``, ``tests/postgres_server.py``); the
arguments every such benchmark takes (library size, requests, rounds); the
per-request context ``dataloader_sync.django.DataLoaderMiddleware`` would
give a view; and ``main``'s shape: run, print the table, write the JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def setup_django(apps: list[str], path: str, database: Optional[dict[str, Any]] = None) -> None:
    """Django configured with *apps* (found on *path*, under the checkout) and migrated."""
    import django
    from django.conf import settings

    sys.path.insert(0, os.path.join(ROOT, path))
    settings.configure(
        INSTALLED_APPS=apps,
        DATABASES={"default": database or {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class Context:
    """What DataLoaderMiddleware gives a view: a fresh registry per request, as ``.loaders``."""

    def __init__(self) -> None:
        from dataloader_sync import DataLoaderRegistry

        self.loaders = DataLoaderRegistry()


def add_library_arguments(p: argparse.ArgumentParser) -> None:
    """The library's size and the run's length, ``--json``, ``--quick`` and ``--postgres``."""
    p.add_argument("--authors", type=int, default=50)
    p.add_argument("--books", type=int, default=4, help="books per author")
    p.add_argument("--reviews", type=int, default=3, help="reviews per book")
    p.add_argument("--requests", type=int, default=20, help="requests per variant per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=5, help="requests per variant before the rounds")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    p.add_argument("--quick", action="store_true", help="small settings")
    p.add_argument("--postgres", action="store_true",
                   help="on a PostgreSQL server started for the run (tests/postgres_server.py) instead of SQLite")


def parsed(p: argparse.ArgumentParser, argv: Optional[list[str]]) -> argparse.Namespace:
    """*p*'s arguments, ``--quick`` applied; ``database`` is set by ``main``."""
    args = p.parse_args(argv)
    args.database = None
    if args.quick:
        args.authors, args.requests, args.rounds, args.warmup = 10, 5, 3, 2
    return args


def main(args: argparse.Namespace, run: Callable[[argparse.Namespace], dict[str, Any]],
         table: Callable[[dict[str, Any]], str], database_name: str) -> int:
    """``run(args)`` on SQLite, or with ``--postgres`` on a server started for it (database
    *database_name*); the table printed and, with ``--json``, the report written."""
    if args.postgres:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from postgres_server import running_postgres_server

        with running_postgres_server() as server:
            name = server.create_database(database_name)
            args.database = {"ENGINE": "django.db.backends.postgresql", "NAME": name, "HOST": server.host,
                             "PORT": str(server.port), "USER": server.user}
            report = run(args)
            from django.db import connections

            connections.close_all()
    else:
        report = run(args)
    print(table(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0
