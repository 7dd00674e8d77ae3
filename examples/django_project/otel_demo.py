#!/usr/bin/env python
"""OpenTelemetry for the example project: the request's span, a span per batch, a span per SQL query.

    pip install "dataloader_sync[django,graphql,otel]" graphene-django \\
        opentelemetry-sdk opentelemetry-instrumentation-django
    python examples/django_project/otel_demo.py    # one GraphQL request; prints its spans as a tree

Django's own OpenTelemetry instrumentation makes the request's span
(``DjangoInstrumentor().instrument()``, before Django loads its middleware:
in ``wsgi.py`` or ``manage.py``); the project's registries carry
``OpenTelemetryInstrumentation`` (``books/loaders.py``), so every batch call is
a span under the request's.  Each SQL query becomes a span too, through
Django's ``connection.execute_wrapper`` (a real project would install
``opentelemetry-instrumentation-dbapi`` or its driver's instrumentation):
it runs inside the batch function, so it nests under the batch's span.  The
database is an in-memory SQLite one, migrated with the sample data.
"""
import json
import os
import pathlib
import sys
from collections.abc import Sequence

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "library_site.settings")

from opentelemetry import trace
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

tracer = trace.get_tracer("examples.django_project")


def sql_span(execute, sql, params, many, context):
    """A span per SQL statement, named by its first word and table."""
    words = sql.replace('"', "").split()
    table = next((words[i + 1] for i, w in enumerate(words[:-1]) if w.upper() in ("FROM", "INTO", "UPDATE")), "")
    with tracer.start_as_current_span(f"{words[0]} {table}".strip()):
        return execute(sql, params, many, context)


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
    DjangoInstrumentor().instrument()  # before django.setup(): it adds its middleware

    import django
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = ":memory:"
    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    call_command("migrate", verbosity=0)
    query = "{ authors { name books { title reviews { rating } } } }"
    with connection.execute_wrapper(sql_span):
        response = Client(HTTP_HOST="localhost").post("/graphql", json.dumps({"query": query}),
                                                     content_type="application/json")
    data = response.json()["data"]
    print(f"{len(data['authors'])} authors, {sum(len(a['books']) for a in data['authors'])} books")
    print("\n".join(span_tree(exporter.get_finished_spans())))


if __name__ == "__main__":
    main()
