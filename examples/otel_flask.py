"""OpenTelemetry for a Flask GraphQL app: the request's span, and a span per batch under it.

    pip install "dataloader_sync[flask,graphql,otel]" graphene \\
        opentelemetry-sdk opentelemetry-instrumentation-flask
    python examples/otel_flask.py       # one GraphQL request; prints its spans as a tree

Flask's own OpenTelemetry instrumentation makes the request's span
(``FlaskInstrumentor().instrument_app(app)``); ``OpenTelemetryInstrumentation``,
given to each request's registry, makes one ``dataloader.batch <loader>`` span
per batch-function call under it: the ``reviews`` loader runs its batches on a
thread pool, and its spans still belong to the request.  Here spans go to an
in-memory exporter so they can be printed; in production use a
``BatchSpanProcessor`` with the exporter of your backend (OTLP, say).
"""
from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Sequence

import graphene
from flask import Flask
from opentelemetry import trace
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry
from dataloader_sync.flask import DataLoaders, graphql_view
from dataloader_sync.otel import OpenTelemetryInstrumentation

AUTHORS = {1: "Ursula K. Le Guin", 2: "Italo Calvino"}
BOOKS = {10: ("A Wizard of Earthsea", 1), 11: ("The Dispossessed", 1), 20: ("Invisible Cities", 2)}
STARS = {10: [5, 4], 11: [5], 20: [4, 4, 5]}

tracer = trace.get_tracer("examples.otel_flask")  # the global provider (set in main())


def load_authors(ids: Sequence[int]) -> dict[int, dict]:
    return {i: {"id": i, "name": AUTHORS[i]} for i in ids if i in AUTHORS}


def load_books_by_author(author_ids: Sequence[int]) -> list[list[dict]]:
    return [[{"id": b, "title": t} for b, (t, a) in BOOKS.items() if a == author_id] for author_id in author_ids]


def load_stars(book_ids: Sequence[int]) -> list[list[int]]:
    with tracer.start_as_current_span("SELECT stars"):  # a database client's span: under the batch's
        return [STARS.get(b, []) for b in book_ids]


POOL = cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="reviews")
OTEL = OpenTelemetryInstrumentation()  # tracer_provider=None: the global one


def make_registry() -> ScheduledDataLoaderRegistry:
    """Each request's loaders; every one is traced (the registry's instrumentation)."""
    registry = ScheduledDataLoaderRegistry(instrumentation=OTEL)
    registry.register("author", DataLoader(load_authors))
    registry.register("books_by_author", DataLoader(load_books_by_author))
    registry.register("stars", DataLoader(load_stars, executor=POOL))
    return registry


class Book(graphene.ObjectType):
    title = graphene.String()
    stars = graphene.List(graphene.Int)

    @staticmethod
    def resolve_stars(book, info):
        return info.context.loaders["stars"].load(book["id"])


class Author(graphene.ObjectType):
    name = graphene.String()
    books = graphene.List(Book)

    @staticmethod
    def resolve_books(author, info):
        return info.context.loaders["books_by_author"].load(author["id"])


class Query(graphene.ObjectType):
    authors = graphene.List(Author, ids=graphene.List(graphene.Int, required=True))

    @staticmethod
    def resolve_authors(root, info, ids):
        return [info.context.loaders["author"].load(i) for i in ids]


app = Flask(__name__)
DataLoaders(app, factory=make_registry)
app.add_url_rule("/graphql", view_func=graphql_view(graphene.Schema(query=Query)))
FlaskInstrumentor().instrument_app(app)  # the request's span


def span_tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """The spans as indented lines, children under their parent, in start order."""
    children: dict[object, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)
    lines: list[str] = []

    def walk(parent: object, depth: int) -> None:
        for span in children.get(parent, []):
            attrs = {k: v for k, v in (span.attributes or {}).items() if k.startswith("dataloader.")}
            shown = ", ".join(f"{k}={v}" for k, v in attrs.items())
            lines.append(f"{'  ' * depth}{span.name}" + (f"  [{shown}]" if shown else ""))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    query = "{ authors(ids: [1, 2]) { name books { title stars } } }"
    response = app.test_client().post("/graphql", json={"query": query})
    print(response.get_json())
    print("\n".join(span_tree(exporter.get_finished_spans())))
    POOL.shutdown()


if __name__ == "__main__":
    main()
