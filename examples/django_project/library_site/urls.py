"""URLs of the example project: the GraphQL endpoint."""
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from dataloader_sync.django import GraphQLView

from books.schema import schema

urlpatterns = [
    # csrf_exempt so that curl and scripts can POST; a real site would keep CSRF.
    path("graphql", csrf_exempt(GraphQLView.as_view(schema=schema, graphiql=True))),
]
