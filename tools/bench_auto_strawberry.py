"""The strawberry-django schemas of ``tools/bench_auto.py --strawberry-django`` (imported by it).

No ``from __future__ import annotations``: the types are made inside a function and strawberry resolves their
annotations from the real objects.
"""
from typing import Any, Optional


def strawberry_schema_for(variant: str) -> Any:
    """The variant's strawberry-django schema: types with no relation resolver (a strawberry schema of its own)."""
    import strawberry
    import strawberry_django
    from orm_library import models
    from strawberry_django.optimizer import DjangoOptimizerExtension

    from dataloader_sync.graphql import DataLoaderExecutionContext
    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry_django.type(models.Tag)
    class Tag:
        name: strawberry.auto

    @strawberry_django.type(models.Review)
    class Review:
        rating: strawberry.auto

    @strawberry_django.type(models.Publisher)
    class Publisher:
        name: strawberry.auto

    @strawberry_django.type(models.Author)
    class AuthorName:
        name: strawberry.auto
        publisher: Optional[Publisher]

    @strawberry_django.type(models.Book)
    class Book:
        title: strawberry.auto
        tags: list[Tag]
        reviews: list[Review]
        author: AuthorName

    @strawberry_django.type(models.Author)
    class Author:
        name: strawberry.auto
        publisher: Optional[Publisher]
        books: list[Book]

        @strawberry_django.field
        def recent_books(self) -> list[Book]:
            return self.books.filter(year__gte=2001).order_by("pk")  # type: ignore[attr-defined, no-any-return]

    @strawberry_django.type(models.Publisher)
    class PublisherWithAuthors:
        name: strawberry.auto
        authors: list[Author]

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self) -> list[Author]:
            return models.Author.objects.order_by("pk")  # type: ignore[return-value]

        @strawberry_django.field
        def publishers(self) -> list[PublisherWithAuthors]:
            return models.Publisher.objects.order_by("pk")  # type: ignore[return-value]

    extensions: list[Any] = []
    if "optimizer" in variant:
        extensions.append(DjangoOptimizerExtension)
    if "auto" in variant:
        extensions.append(AutoRelationsExtension)
    return strawberry.Schema(query=Query, extensions=extensions, execution_context_class=DataLoaderExecutionContext)
