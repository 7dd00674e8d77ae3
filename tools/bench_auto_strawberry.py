"""The strawberry-django schemas of ``tools/bench_auto.py --strawberry-django`` (imported by it).

No ``from __future__ import annotations``: the types are made inside a function and strawberry resolves their
annotations from the real objects.
"""
from typing import Any, Callable, Optional


def strawberry_schema_for(variant: str) -> Any:
    """The variant's strawberry-django schema: types with no relation resolver (a strawberry schema of its own)."""
    import strawberry
    import strawberry_django
    from django.db.models import Count, Prefetch
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

    recent = models.Book.objects.filter(year__gte=2001).order_by("pk")
    by_year = models.Book.objects.order_by("-year", "pk")
    reviewed = models.Book.objects.annotate(n=Count("reviews")).filter(n__gte=2).order_by("title", "pk")
    not_2001 = models.Book.objects.exclude(year=2001).order_by("pk")

    if variant == "optimizer-hints":  # the optimizer's way: each field's rows prefetched by its hint, read back

        def hinted(attr: str, queryset: Callable[[], Any]) -> Any:
            def resolve(self: Any) -> list[Book]:
                return list(getattr(self, attr))

            # a Prefetch per query: an optimizer may prefix the one it is given in place
            return strawberry_django.field(
                resolver=resolve, prefetch_related=[lambda info: Prefetch("books", queryset=queryset(), to_attr=attr)])

        @strawberry_django.type(models.Author)
        class Author:
            name: strawberry.auto
            publisher: Optional[Publisher]
            books: list[Book]
            recent_books: list[Book] = hinted("recent_rows", lambda: recent.prefetch_related("tags"))
            top_two: list[Book] = hinted("top_two_rows", lambda: by_year[:2])
            reviewed: list[Book] = hinted("reviewed_rows", lambda: reviewed)
            not2001: list[Book] = hinted("not_2001_rows", lambda: not_2001)
    else:  # the resolvers as a team writes them: the relation's queryset, returned

        @strawberry_django.type(models.Author)
        class Author:  # type: ignore[no-redef]
            name: strawberry.auto
            publisher: Optional[Publisher]
            books: list[Book]

            @strawberry_django.field
            def recent_books(self) -> list[Book]:
                return self.books.filter(year__gte=2001).order_by("pk")  # type: ignore[attr-defined, no-any-return]

            @strawberry_django.field
            def top_two(self) -> list[Book]:
                return self.books.order_by("-year", "pk")[:2]  # type: ignore[attr-defined, no-any-return]

            @strawberry_django.field
            def reviewed(self) -> list[Book]:
                return self.books.annotate(  # type: ignore[attr-defined, no-any-return]
                    n=Count("reviews")).filter(n__gte=2).order_by("title", "pk")

            @strawberry_django.field
            def not2001(self) -> list[Book]:  # graphene's list-field shape: the same on strawberry-django
                return self.books.exclude(year=2001).order_by("pk")  # type: ignore[attr-defined, no-any-return]

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
