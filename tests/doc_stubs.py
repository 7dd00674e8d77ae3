"""Stubs that documentation blocks name with ``.. snippet: stubs=NAME`` (see test_docs_snippets.py).

Each stub is a function that fills the block's namespace with what the page
assumes but does not show.  They run in the block's own interpreter.
"""
from __future__ import annotations

import pathlib
import sys
from typing import Any, Callable

EXAMPLE_DIR = pathlib.Path(__file__).resolve().parent.parent / "examples" / "django_project"


def django_models(namespace: dict[str, Any]) -> None:
    """Django configured with the example project's ``books`` app on in-memory SQLite, migrated;
    its models (``Author``, ``Book``, ``Review``) in the namespace (graphene-django is not needed)."""
    import importlib.util

    import django
    from django.conf import settings

    if not settings.configured:
        sys.path.insert(0, str(EXAMPLE_DIR))
        settings.configure(
            INSTALLED_APPS=[*(["graphene_django"] if importlib.util.find_spec("graphene_django") else []), "books"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
            DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
            USE_TZ=True,
        )
        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
    from books.models import Author, Book, Review

    namespace.update(Author=Author, Book=Book, Review=Review)


def django_books(namespace: dict[str, Any]) -> None:
    """``django_models``, and a relay ``BookNode`` (graphene-django) in the namespace."""
    django_models(namespace)
    from books.models import Book
    from graphene import relay
    from graphene_django import DjangoObjectType

    class BookNode(DjangoObjectType):
        class Meta:
            model = Book
            fields = ("id", "title")
            interfaces = (relay.Node,)

    namespace.update(BookNode=BookNode)


def redis_server(namespace: dict[str, Any]) -> None:
    """A redis-server of the block's own on a free port (stopped when the interpreter exits): ``REDIS_PORT``."""
    import atexit

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import shutil

    from redis_server import RedisServer

    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("this page's blocks need a redis-server binary (apt-get install redis-server)")
    server = RedisServer(binary)
    server.start()
    atexit.register(server.stop)
    namespace["REDIS_PORT"] = server.port


STUBS: dict[str, Callable[[dict[str, Any]], None]] = {
    "django_books": django_books,
    "django_models": django_models,
    "redis_server": redis_server,
}
