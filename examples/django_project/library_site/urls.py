"""URLs of the example project: the GraphQL endpoint (graphene), and /strawberry when strawberry is installed."""
import importlib.util

from books.schema import schema
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from dataloader_sync.django import GraphQLView

urlpatterns = [
    # csrf_exempt so that curl and scripts can POST; a real site would keep CSRF.
    path("graphql", csrf_exempt(GraphQLView.as_view(schema=schema, graphiql=True))),
]

if importlib.util.find_spec("strawberry") is not None:
    from books import strawberry_schema

    urlpatterns.append(
        path("strawberry", csrf_exempt(strawberry_schema.LoaderGraphQLView.as_view(schema=strawberry_schema.schema)))
    )
