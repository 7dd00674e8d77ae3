"""The same library with strawberry: ``/strawberry`` (when strawberry is installed).

strawberry's Django view builds the context with ``get_context``;
``LoaderGraphQLView`` keeps strawberry's context and adds the registry that
``DataLoaderMiddleware`` made for the request, so resolvers use
``info.context.loaders`` exactly as the graphene schema does, and the schema
executes with ``DataLoaderExecutionContext``: one SQL query per level.
"""
from typing import Optional

import strawberry
from strawberry.django.views import GraphQLView

from dataloader_sync.graphql import DataLoaderExecutionContext

from . import models


@strawberry.type
class Review:
    id: int
    rating: int


@strawberry.type
class Book:
    id: int
    title: str
    author_id: strawberry.Private[int]

    @strawberry.field
    def author(self, info: strawberry.Info) -> "Author":
        return info.context.loaders["author"].load(self.author_id)

    @strawberry.field
    def reviews(self, info: strawberry.Info) -> list[Review]:
        return info.context.loaders["reviews_by_book"].load(self.id)


@strawberry.type
class Author:
    id: int
    name: str

    @strawberry.field
    def books(self, info: strawberry.Info) -> list[Book]:
        return info.context.loaders["books_by_author"].load(self.id)


@strawberry.type
class Query:
    @strawberry.field
    def authors(self) -> list[Author]:
        return list(models.Author.objects.order_by("id"))

    @strawberry.field
    def author(self, info: strawberry.Info, id: int) -> Optional[Author]:
        return info.context.loaders["author"].load(id)


schema = strawberry.Schema(query=Query, execution_context_class=DataLoaderExecutionContext)


class LoaderGraphQLView(GraphQLView):
    """strawberry's view with the request's registry as ``info.context.loaders``."""

    def get_context(self, request, response):
        context = super().get_context(request, response)  # StrawberryDjangoContext(request, response)
        context.loaders = request.loaders  # DataLoaderMiddleware's registry for this request
        return context
