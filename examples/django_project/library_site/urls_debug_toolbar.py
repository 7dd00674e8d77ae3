"""URLs of the example project with django-debug-toolbar: the project's, an HTML page of authors, the toolbar's.

``/authors`` runs ``{ authors { name books { title reviews { rating } } } }``
through the project's schema (the request's loaders) and renders it as HTML,
so the toolbar has a page to show itself on.
"""
from books.schema import schema
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.utils.html import format_html, format_html_join

from dataloader_sync.graphql import DataLoaderExecutionContext

from .urls import urlpatterns as project_urlpatterns

AUTHORS = "{ authors { name books { title reviews { rating } } } }"


def authors(request: HttpRequest) -> HttpResponse:
    result = schema.execute(AUTHORS, context_value=request, execution_context_class=DataLoaderExecutionContext)
    if result.errors:
        raise result.errors[0]
    items = format_html_join("", "<li>{}<ul>{}</ul></li>", (
        (author["name"], format_html_join("", "<li>{} ({})</li>", (
            (book["title"], ", ".join(str(r["rating"]) for r in book["reviews"])) for book in author["books"])))
        for author in result.data["authors"]))
    return HttpResponse(format_html(
        "<!doctype html><html><head><title>Authors</title></head>"
        "<body><h1>Authors</h1><ul>{}</ul></body></html>", items))


urlpatterns = [
    *project_urlpatterns,
    path("authors", authors),
    path("__debug__/", include("debug_toolbar.urls")),
]
