"""A Flask app serving a graphene schema with dataloaders.

    python examples/flask_app.py        # serves on http://127.0.0.1:5000/graphql
    curl -s 127.0.0.1:5000/graphql -H 'content-type: application/json' \\
         -d '{"query": "{ books { title author { name books { title } } } }"}'

Imported, it only builds ``app``.  Each request gets its own registry (fresh
caches) from ``make_registry``; resolvers return the loaders' futures and
``graphql_view`` executes with ``DataLoaderExecutionContext``, so the query
above calls each batch function once per level, not once per book.  The
"database" is a dict; ``CALLS`` counts the batch calls (see ``/stats``).
"""
from __future__ import annotations

import collections
import threading
from collections.abc import Sequence

import graphene
from flask import Flask, jsonify

from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry
from dataloader_sync.flask import DataLoaders, graphql_view

AUTHORS = {1: "Ursula K. Le Guin", 2: "Italo Calvino", 3: "Stanisław Lem"}
BOOKS = {
    10: ("A Wizard of Earthsea", 1),
    11: ("The Dispossessed", 1),
    20: ("Invisible Cities", 2),
    21: ("If on a winter's night a traveler", 2),
    30: ("Solaris", 3),
}

#: Batch calls per loader since start: the N+1 problem would show here.
CALLS: collections.Counter = collections.Counter()
_CALLS_LOCK = threading.Lock()  # guards CALLS (the dev server runs requests on threads)


def _count(loader: str) -> None:
    with _CALLS_LOCK:
        CALLS[loader] += 1


def load_authors(ids: Sequence[int]) -> dict[int, dict]:
    _count("author")
    return {i: {"id": i, "name": AUTHORS[i]} for i in ids if i in AUTHORS}


def load_books_by_author(author_ids: Sequence[int]) -> list[list[dict]]:
    _count("books_by_author")
    return [
        [{"id": b, "title": title, "author_id": a} for b, (title, a) in BOOKS.items() if a == author_id]
        for author_id in author_ids
    ]


def make_registry() -> ScheduledDataLoaderRegistry:
    """A new registry with fresh loaders, once per request."""
    registry = ScheduledDataLoaderRegistry()
    registry.register("author", DataLoader(load_authors, name="author"))
    registry.register("books_by_author", DataLoader(load_books_by_author, name="books_by_author"))
    return registry


class Author(graphene.ObjectType):
    id = graphene.ID(required=True)
    name = graphene.String(required=True)
    books = graphene.List(graphene.NonNull(lambda: Book), required=True)

    @staticmethod
    def resolve_books(author, info):
        return info.context.loaders["books_by_author"].load(author["id"])


class Book(graphene.ObjectType):
    id = graphene.ID(required=True)
    title = graphene.String(required=True)
    author = graphene.Field(Author, required=True)

    @staticmethod
    def resolve_author(book, info):
        return info.context.loaders["author"].load(book["author_id"])


class Query(graphene.ObjectType):
    books = graphene.List(graphene.NonNull(Book), required=True)
    author = graphene.Field(Author, id=graphene.ID(required=True))

    @staticmethod
    def resolve_books(root, info):
        return [{"id": b, "title": title, "author_id": a} for b, (title, a) in BOOKS.items()]

    @staticmethod
    def resolve_author(root, info, id):
        return info.context.loaders["author"].load(int(id))


schema = graphene.Schema(query=Query)  # graphene's default resolver reads dict keys


def create_app() -> Flask:
    """Build the app: the DataLoaders extension and the GraphQL endpoint."""
    app = Flask(__name__)
    DataLoaders(app, factory=make_registry)
    app.add_url_rule("/graphql", view_func=graphql_view(schema))

    @app.get("/stats")
    def stats():
        with _CALLS_LOCK:
            return jsonify(dict(CALLS))

    return app


app = create_app()

if __name__ == "__main__":
    app.run(host="127.0.0.1", port=5000)
