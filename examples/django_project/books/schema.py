"""The GraphQL schema: every relation is resolved through the request's loaders.

Resolvers return the loaders' futures; ``DataLoaderExecutionContext`` (set by
``dataloader_sync.django.GraphQLView``) dispatches them one batch per loader
per level, so ``{ authors { books { reviews { rating } } } }`` costs three SQL
queries however many authors, books and reviews there are.
"""
import graphene
from graphene_django import DjangoObjectType

from . import models
from .loaders import value_cache


class Review(DjangoObjectType):
    class Meta:
        model = models.Review
        fields = ("id", "rating", "body")

    book = graphene.Field(lambda: Book, required=True)

    @staticmethod
    def resolve_book(review, info):
        return info.context.loaders["book"].load(review.book_id)


class Book(DjangoObjectType):
    class Meta:
        model = models.Book
        fields = ("id", "title")

    author = graphene.Field(lambda: Author, required=True)
    reviews = graphene.List(graphene.NonNull(Review), required=True)

    @staticmethod
    def resolve_author(book, info):
        return info.context.loaders["author"].load(book.author_id)

    @staticmethod
    def resolve_reviews(book, info):
        return info.context.loaders["reviews_by_book"].load(book.id)


class Author(DjangoObjectType):
    class Meta:
        model = models.Author
        fields = ("id", "name")

    books = graphene.List(graphene.NonNull(Book), required=True)

    @staticmethod
    def resolve_books(author, info):
        return info.context.loaders["books_by_author"].load(author.id)


class Query(graphene.ObjectType):
    authors = graphene.List(graphene.NonNull(Author), required=True)
    author = graphene.Field(Author, id=graphene.ID(required=True))
    books = graphene.List(graphene.NonNull(Book), required=True)

    @staticmethod
    def resolve_authors(root, info):
        return models.Author.objects.order_by("id")

    @staticmethod
    def resolve_author(root, info, id):
        return info.context.loaders["author"].load(int(id))

    @staticmethod
    def resolve_books(root, info):
        return models.Book.objects.order_by("id")


class AddReview(graphene.Mutation):
    """Review a book; the book's cached reviews are forgotten (by this request's loader and the shared
    value cache) so the answer and later requests show the new one."""

    class Arguments:
        book_id = graphene.ID(required=True)
        rating = graphene.Int(required=True)
        body = graphene.String(default_value="")

    review = graphene.Field(Review, required=True)

    @staticmethod
    def mutate(root, info, book_id, rating, body):
        if not 1 <= rating <= 5:
            raise ValueError("rating must be between 1 and 5")
        review = models.Review.objects.create(book_id=int(book_id), rating=rating, body=body)
        info.context.loaders["reviews_by_book"].clear(review.book_id)
        shared = value_cache("reviews_by_book")  # and for the next requests, when the example shares rows
        if shared is not None:
            shared.delete(review.book_id)
        return AddReview(review=review)


class Mutation(graphene.ObjectType):
    add_review = AddReview.Field()


schema = graphene.Schema(query=Query, mutation=Mutation)
