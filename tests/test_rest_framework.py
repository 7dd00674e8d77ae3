"""dataloader_sync.rest_framework on real REST framework views and viewsets, on the orm_library app, on SQLite and
PostgreSQL: every shape costs one statement per relation per level with ``AutoRelationsMixin`` (or
``batched_data``), and its response is byte for byte the one the same view makes without it."""
from __future__ import annotations

import importlib
import importlib.util
import types

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("rest_framework") is None:  # importing it needs configured settings
    pytest.skip("djangorestframework is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")

NESTED_SLUGS = importlib.util.find_spec("rest_framework") is not None and \
    tuple(map(int, importlib.import_module("rest_framework").VERSION.split(".")[:2])) >= (3, 15)

urlpatterns: list = []  # filled by the ``api`` fixture: this module is the ROOT_URLCONF of its tests


class RouteTo:
    """A database router sending reads and writes to one alias (the views' querysets name none)."""

    def __init__(self, alias):
        self.alias = alias

    def db_for_read(self, model, **hints):
        return self.alias

    def db_for_write(self, model, **hints):
        return self.alias


def serializers_of():
    """The serializers of every shape (REST framework's public API only)."""
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.django import related_loader

    class Review(s.ModelSerializer):
        class Meta:
            model = models.Review
            fields = ["id", "rating", "body"]

    class Tag(s.ModelSerializer):
        class Meta:
            model = models.Tag
            fields = ["id", "name"]

    class Publisher(s.ModelSerializer):
        class Meta:
            model = models.Publisher
            fields = ["id", "name"]

    class Profile(s.ModelSerializer):
        class Meta:
            model = models.AuthorProfile
            fields = ["id", "bio"]

    class Book(s.ModelSerializer):
        reviews = Review(many=True, read_only=True)
        tags = Tag(many=True, read_only=True)

        class Meta:
            model = models.Book
            fields = ["id", "title", "year", "reviews", "tags"]

    class Author(s.ModelSerializer):
        publisher = Publisher(read_only=True)  # None for every third author
        profile = Profile(read_only=True)  # a reverse one-to-one: None for odd authors
        books = Book(many=True, read_only=True)

        class Meta:
            model = models.Author
            fields = ["id", "name", "publisher", "profile", "books"]

    class OptedOutAuthor(Author):
        class Meta(Author.Meta):
            no_auto_relations = ["books"]

    class BookFields(s.ModelSerializer):
        """Every relational field REST framework has, and dotted sources."""

        url = s.HyperlinkedIdentityField(view_name="book-detail")
        author_link = s.HyperlinkedRelatedField(source="author", view_name="author-detail", read_only=True)
        author_pk = s.PrimaryKeyRelatedField(source="author", read_only=True)
        author_name = s.SlugRelatedField(source="author", slug_field="name", read_only=True)
        author_str = s.StringRelatedField(source="author")
        publisher_name = s.CharField(source="author.publisher.name", default=None)  # through a None publisher
        tag_ids = s.PrimaryKeyRelatedField(source="tags", many=True, read_only=True)
        tag_names = s.SlugRelatedField(source="tags", slug_field="name", many=True, read_only=True)
        tag_strs = s.StringRelatedField(source="tags", many=True)
        review_links = s.HyperlinkedRelatedField(source="reviews", many=True, view_name="review-detail",
                                                 read_only=True)
        review_count = s.IntegerField(source="reviews.count")

        class Meta:
            model = models.Book
            fields = ["id", "url", "title", "author_link", "author_pk", "author_name", "author_str",
                      "publisher_name", "tag_ids", "tag_names", "tag_strs", "review_links", "review_count"]

    class ReviewFields(s.ModelSerializer):
        book_title = s.CharField(source="book.title")
        # REST framework reads a slug path from 3.15; 3.14 a dotted source
        author_name = s.SlugRelatedField(source="book", slug_field="author__name", read_only=True) if NESTED_SLUGS \
            else s.CharField(source="book.author.name")

        class Meta:
            model = models.Review
            fields = ["id", "rating", "book_title", "author_name"]

    class BookDepth(s.ModelSerializer):
        class Meta:
            model = models.Book
            fields = ["id", "title", "author", "tags"]
            depth = 2  # author { publisher }, tags

    class Note(s.ModelSerializer):
        target = s.StringRelatedField()  # a GenericForeignKey

        class Meta:
            model = models.Note
            fields = ["id", "text", "target"]

    class AuthorNotes(s.ModelSerializer):
        notes = Note(many=True, read_only=True)  # a GenericRelation

        class Meta:
            model = models.Author
            fields = ["id", "name", "notes"]

    class HighRatedOnly(s.ListSerializer):
        def to_representation(self, data):
            return [row for row in super().to_representation(data) if row["rating"] >= 3]

    class RatedReview(Review):
        class Meta(Review.Meta):
            list_serializer_class = HighRatedOnly

    class OverriddenBook(Book):
        """to_representation overrides on the serializer and on its reviews' list serializer."""

        reviews = RatedReview(many=True, read_only=True)

        class Meta(Book.Meta):
            pass

        def to_representation(self, instance):
            data = super().to_representation(instance)
            data["tag_count"] = len(data.pop("tags"))
            return data

    class OverriddenAuthors(Author):
        books = OverriddenBook(many=True, read_only=True)

        class Meta(Author.Meta):
            pass

    class BookMethods(s.ModelSerializer):
        review_count = s.SerializerMethodField()

        class Meta:
            model = models.Book
            fields = ["id", "title", "review_count"]

        def get_review_count(self, book):  # a loader future
            return related_loader(self.context["request"].loaders, models.Book.reviews).load(book).then(len)

    class AuthorMethods(s.ModelSerializer):
        book_count = s.SerializerMethodField()
        best_rating = s.SerializerMethodField()
        books = BookMethods(many=True, read_only=True)

        class Meta:
            model = models.Author
            fields = ["id", "name", "book_count", "best_rating", "books"]

        def get_book_count(self, author):
            return related_loader(self.context["request"].loaders, models.Author.books).load(author).then(len)

        def get_best_rating(self, author):  # a then chain that loads again
            loaders = self.context["request"].loaders
            return related_loader(loaders, models.Author.books).load(author).then(
                lambda books: related_loader(loaders, models.Book.reviews).load_many(books)).then(
                lambda reviews: max((review.rating for rows in reviews for review in rows), default=None))

    class BookValues(BookMethods):
        """BookMethods' values, read row by row: what the plain view serves."""

        class Meta(BookMethods.Meta):
            pass

        def get_review_count(self, book):
            return book.reviews.count()

    class AuthorValues(AuthorMethods):
        books = BookValues(many=True, read_only=True)

        class Meta(AuthorMethods.Meta):
            pass

        def get_book_count(self, author):
            return author.books.count()

        def get_best_rating(self, author):
            return max((review.rating for book in author.books.all() for review in book.reviews.all()), default=None)

    return types.SimpleNamespace(**{name: value for name, value in locals().items() if isinstance(value, type)})


def views_of(ser):
    """(plain, batched) pairs of views of every shape: the batched one is the plain one with the mixin first."""
    from orm_library import models
    from rest_framework import generics, pagination, views, viewsets
    from rest_framework.response import Response

    from dataloader_sync.rest_framework import AutoRelationsMixin, batched_data

    class Authors(generics.ListAPIView):
        queryset = models.Author.objects.order_by("id")
        serializer_class = ser.Author

    class AuthorDetail(generics.RetrieveAPIView):
        queryset = models.Author.objects.all()
        serializer_class = ser.Author

    class PrefetchedAuthors(Authors):
        queryset = models.Author.objects.order_by("id").select_related("publisher").prefetch_related("books")

    class OptedOutAuthors(Authors):
        serializer_class = ser.OptedOutAuthor

    class OverriddenAuthors(Authors):
        serializer_class = ser.OverriddenAuthors

    class PageNumber(pagination.PageNumberPagination):
        page_size = 2

    class LimitOffset(pagination.LimitOffsetPagination):
        default_limit = 2

    class Cursor(pagination.CursorPagination):
        page_size = 2
        ordering = "id"

    class PagedAuthors(Authors):
        pagination_class = PageNumber

    class OffsetAuthors(Authors):
        pagination_class = LimitOffset

    class CursorAuthors(Authors):
        pagination_class = Cursor

    class BookViewSet(viewsets.ModelViewSet):
        queryset = models.Book.objects.order_by("id").prefetch_related("tags")

        def get_serializer_class(self):
            return ser.BookFields if self.action in ("list", "retrieve") else ser.BookWritable

    class DepthBooks(generics.ListAPIView):
        queryset = models.Book.objects.order_by("id")
        serializer_class = ser.BookDepth

    class Reviews(viewsets.ReadOnlyModelViewSet):
        queryset = models.Review.objects.order_by("id")
        serializer_class = ser.ReviewFields

    class Notes(generics.ListAPIView):
        queryset = models.Note.objects.order_by("id")
        serializer_class = ser.Note

    class AuthorNotes(generics.ListAPIView):
        queryset = models.Author.objects.order_by("id")
        serializer_class = ser.AuthorNotes

    class MethodAuthors(Authors):
        def get_serializer_class(self):  # the plain view reads the same values row by row
            return ser.AuthorMethods if isinstance(self, AutoRelationsMixin) else ser.AuthorValues

    class OwnSerializerAuthors(views.APIView):
        """An APIView that builds its serializer itself: batched_data is its one line."""

        batched = False

        def get(self, request):
            serializer = ser.Author(models.Author.objects.order_by("id"), many=True, context={"request": request})
            return Response(batched_data(serializer) if self.batched else serializer.data)

    class LoaderNames(AutoRelationsMixin, generics.ListAPIView):
        """The mixin's loaders, named in the request's registry (DataLoaderMiddleware's request.loaders)."""

        queryset = models.Author.objects.order_by("id")
        serializer_class = ser.Author

        def list(self, request, *args, **kwargs):
            data = self.get_serializer(self.get_queryset(), many=True).data
            stats = request.loaders.statistics_by_loader()
            return Response({"authors": len(data), "batches": {name: stats[name].batch_invoke_count
                                                               for name in stats if "." in name}})

    class AuthorViewSet(viewsets.ReadOnlyModelViewSet):
        queryset = models.Author.objects.order_by("id")
        serializer_class = ser.Author

    plain = {name: view for name, view in locals().items() if isinstance(view, type) and hasattr(view, "as_view")}
    own = plain.pop("OwnSerializerAuthors")
    names = plain.pop("LoaderNames")
    pairs = {name: (view, type(f"Batched{name}", (AutoRelationsMixin, view), {})) for name, view in plain.items()}
    pairs["OwnSerializerAuthors"] = (own, type("BatchedOwnSerializerAuthors", (own,), {"batched": True}))
    pairs["LoaderNames"] = (names, names)
    return pairs


def writable_serializer(ser):
    from orm_library import models
    from rest_framework import serializers as s

    class BookWritable(s.ModelSerializer):
        reviews = ser.Review(many=True, read_only=True)
        tag_names = s.SlugRelatedField(source="tags", slug_field="name", many=True, read_only=True)

        class Meta:
            model = models.Book
            fields = ["id", "title", "year", "author", "tags", "reviews", "tag_names"]

    return BookWritable


@pytest.fixture(scope="module")
def api(django_example_project):
    """The shapes' views, routed under /plain/ and /batched/ (this module is the URL conf)."""
    from django.urls import include, path
    from rest_framework.routers import SimpleRouter

    ser = serializers_of()
    ser.BookWritable = writable_serializer(ser)
    views = views_of(ser)
    router = SimpleRouter()  # the names the hyperlinked fields reverse: author-detail, book-detail, review-detail
    router.register("authors", views["AuthorViewSet"][1], basename="author")
    router.register("books", views["BookViewSet"][1], basename="book")
    router.register("reviews", views["Reviews"][1], basename="review")
    patterns = [path("", include(router.urls))]
    for name, (plain, batched) in views.items():
        suffix = "<int:pk>/" if name == "AuthorDetail" else ""
        if name.endswith("ViewSet") or name == "Reviews":
            writes = name == "BookViewSet"
            list_actions = {"get": "list", **({"post": "create"} if writes else {})}
            detail_actions = {"get": "retrieve", **({"put": "update", "patch": "partial_update"} if writes else {})}
            patterns += [path(f"plain/{name}/", plain.as_view(list_actions)),
                         path(f"batched/{name}/", batched.as_view(list_actions)),
                         path(f"plain/{name}/<int:pk>/", plain.as_view(detail_actions)),
                         path(f"batched/{name}/<int:pk>/", batched.as_view(detail_actions))]
        else:
            patterns += [path(f"plain/{name}/{suffix}", plain.as_view()),
                         path(f"batched/{name}/{suffix}", batched.as_view())]
    urlpatterns[:] = patterns
    return types.SimpleNamespace(ser=ser, views=views)


@pytest.fixture
def client(api, orm_db):
    from django.test import override_settings
    from rest_framework.test import APIClient

    with override_settings(ROOT_URLCONF=__name__, DATABASE_ROUTERS=[RouteTo(orm_db)]):
        yield APIClient()


def fetch(client, orm_db, url, method="get", **data):
    """The response to *url* (its status and body) and the statements it ran on *orm_db*."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connections[orm_db]) as queries:
        response = getattr(client, method)(url, data or None, format="json")
    return response, len(queries)


def compare(client, orm_db, url, method="get", **data):
    """(plain statements, batched statements, the batched response's JSON), the two bodies equal byte for byte."""
    plain, plain_count = fetch(client, orm_db, f"/plain/{url}", method, **data)
    batched, batched_count = fetch(client, orm_db, f"/batched/{url}", method, **data)
    assert plain.status_code == batched.status_code, (plain.content, batched.content)
    assert batched.content.replace(b"/batched/", b"/plain/") == plain.content  # a page's links name the view
    return plain_count, batched_count, batched.json()


def warm_content_types(orm_db):
    """Fill Django's content type cache for the notes' targets (a statement each, once per process)."""
    from django.contrib.contenttypes.models import ContentType
    from orm_library import models

    for model in (models.Author, models.Book, models.Note):
        ContentType.objects.db_manager(orm_db).get_for_model(model)


def add_notes(orm_db, lib):
    from django.contrib.contenttypes.models import ContentType
    from orm_library import models

    notes = []
    for i, target in enumerate([*lib.authors, *lib.books]):
        if i % 3 != 1:  # some rows have none
            notes.append(models.Note(content_type=ContentType.objects.db_manager(orm_db).get_for_model(target),
                                     object_id=target.pk, text=f"note {i}"))
    models.Note.objects.using(orm_db).bulk_create(notes)


# -- nested serializers, a level at a time --------------------------------------------------------

def test_nested_serializers_cost_one_statement_per_relation_per_level(client, orm_db, library):
    library(orm_db, authors=6, books=3, reviews=2)
    plain, batched, data = compare(client, orm_db, "Authors/")
    # authors joined to their publisher and profile (to-one hops of the root); then books; then the books'
    # reviews and tags
    assert batched == 4
    assert plain == 1 + 4 + 6 + 6 + 18 + 18  # a publisher for 4 of 6 authors, the rest per row
    assert [a["publisher"] for a in data].count(None) == 2 and [a["profile"] for a in data].count(None) == 3
    assert [len(a["books"]) for a in data] == [3] * 6 and data[0]["books"][0]["tags"]


def test_empty_relations_and_an_empty_list_are_serialized_as_without_the_mixin(client, orm_db, library):
    library(orm_db, authors=3, books=0, reviews=0, tags=0, publishers=0)
    _, batched, data = compare(client, orm_db, "Authors/")
    # authors joined to their (missing) publisher and profile, books
    assert batched == 2 and [a["books"] for a in data] == [[], [], []]
    assert all(a["publisher"] is None for a in data)
    from orm_library import models

    models.Author.objects.using(orm_db).all().delete()
    assert compare(client, orm_db, "Authors/") == (1, 1, [])


def test_a_detail_view_batches_the_levels_below_its_object(client, orm_db, library):
    lib = library(orm_db, authors=2, books=4, reviews=3)
    plain, batched, data = compare(client, orm_db, f"AuthorDetail/{lib.authors[0].pk}/")
    assert batched == 1 + 3 + 2  # the author; publisher, profile, books; reviews, tags
    assert plain == 1 + 3 + 4 + 4 and len(data["books"]) == 4
    _, _, missing = compare(client, orm_db, "AuthorDetail/999999/")
    assert missing["detail"] in ("No Author matches the given query.", "Not found.")  # REST framework 3.15, 3.14


def test_what_the_view_prefetched_is_used_as_it_is(client, orm_db, library):
    library(orm_db, authors=5, books=2, reviews=1)
    plain, batched, _ = compare(client, orm_db, "PrefetchedAuthors/")
    # authors joined to their publisher (the view's join) and their profile (added to it), the books prefetch
    # (the view's); reviews, tags
    assert batched == 2 + 2
    assert plain == 2 + 5 + 10 + 10


def test_every_relational_field_and_dotted_sources(client, orm_db, library):
    library(orm_db, authors=4, books=3, reviews=2)
    plain, batched, data = compare(client, orm_db, "BookViewSet/")
    # books joined to their author and its publisher, with the view's tags prefetch; Book.reviews
    assert batched == 2 + 1
    assert plain == 2 + 12 + 12 + 12 + 9  # per book: author, reviews (links), reviews.count; publisher (9 of 12)
    first = data[0]
    assert first["url"].endswith(f"/books/{first['id']}/")
    assert first["author_link"].endswith(f"/authors/{first['author_pk']}/")
    assert first["review_count"] == 2 and len(first["review_links"]) == 2 and first["tag_names"]
    assert {book["publisher_name"] for book in data} == {"publisher 0", "publisher 1", None}


def test_a_slug_path_and_a_dotted_source_through_two_hops(client, orm_db, library):
    library(orm_db, authors=3, books=2, reviews=2)
    plain, batched, data = compare(client, orm_db, "Reviews/")
    assert batched == 1  # reviews joined to their book and its author (the slug's author__name)
    assert plain == 1 + 12 + 12
    assert data[0]["author_name"] == "author 0" and data[0]["book_title"] == "book 0.0"


def test_depth_builds_nested_serializers_that_are_batched_too(client, orm_db, library):
    library(orm_db, authors=4, books=2)
    plain, batched, data = compare(client, orm_db, "DepthBooks/")
    assert batched == 1 + 1  # books joined to their author and its publisher; Book.tags
    assert plain == 1 + 8 + 8 + 8 * 2 // 3 + 1
    assert data[0]["author"]["publisher"] == {"id": data[0]["author"]["publisher"]["id"], "name": "publisher 0"}


def test_generic_foreign_keys_and_generic_relations(client, orm_db, library):
    lib = library(orm_db, authors=3, books=2)
    add_notes(orm_db, lib)
    warm_content_types(orm_db)
    plain, batched, data = compare(client, orm_db, "Notes/")
    assert batched == 1 + 2  # notes; their targets, one statement per target model
    assert plain == 1 + len(data)
    plain, batched, data = compare(client, orm_db, "AuthorNotes/")
    # authors; Author.notes, whose rows know their target (the author): no statement for it
    assert batched == 1 + 1 and plain == 1 + 3 + 2
    assert [len(a["notes"]) for a in data] == [1, 0, 1] and data[0]["notes"][0]["target"] == "author 0"


def test_to_representation_overrides_keep_their_output(client, orm_db, library):
    library(orm_db, authors=3, books=2, reviews=4)
    plain, batched, data = compare(client, orm_db, "OverriddenAuthors/")
    assert batched == 4 and plain > batched
    assert "tag_count" in data[0]["books"][0] and "tags" not in data[0]["books"][0]
    assert all(review["rating"] >= 3 for a in data for b in a["books"] for review in b["reviews"])


# -- pages ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("view, query, counted, published", [
    ("PagedAuthors", "?page=2", 1, 1), ("OffsetAuthors", "?offset=2", 1, 1), ("CursorAuthors", "", 0, 2)])
def test_pagination_serializes_the_page_breadth_first(client, orm_db, library, view, query, counted, published):
    library(orm_db, authors=6, books=2, reviews=1)
    plain, batched, data = compare(client, orm_db, f"{view}/{query}")
    assert len(data["results"]) == 2
    # the page count (page number, limit/offset); the page, joined to its authors' publisher and profile before
    # the paginator cut it (the mixin's paginate_queryset); books; reviews, tags
    assert batched == counted + 4
    assert plain == counted + 1 + published + 2 + 2 + 2 * 2 * 2
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connections[orm_db]) as queries:
        client.get(f"/batched/{view}/{query}")
    statements = [q["sql"] for q in queries]
    assert all("JOIN" not in sql for sql in statements[:counted])  # the count joins nothing
    page = statements[counted]
    assert "LEFT OUTER JOIN" in page and "publisher" in page and "authorprofile" in page.lower()


# -- opting out, writes ------------------------------------------------------------------------------

def test_a_field_in_meta_no_auto_relations_is_left_to_rest_framework(client, orm_db, library):
    library(orm_db, authors=3, books=2, reviews=1)
    plain, batched, _ = compare(client, orm_db, "OptedOutAuthors/")
    assert batched == 1 + 3 + 6 + 6  # publisher and profile joined; books and below row by row
    assert plain == 1 + 2 + 3 + 3 + 6 + 6


def test_writes_and_their_responses_are_unaffected(client, orm_db, library):
    from orm_library import models

    lib = library(orm_db, authors=2, books=2, reviews=1, tags=3)
    book = lib.books[0]
    tag_names = {tag.pk: tag.name for tag in lib.tags}
    for side, tags in (("plain", [lib.tags[2].pk]), ("batched", [lib.tags[1].pk, lib.tags[2].pk])):
        response = client.patch(f"/{side}/BookViewSet/{book.pk}/", {"title": f"by {side}", "tags": tags},
                                format="json")
        assert response.status_code == 200, response.content
        body = response.json()
        # the tags written, not those prefetched before the write
        assert body["tags"] == tags and body["tag_names"] == [tag_names[pk] for pk in tags]
        assert models.Book.objects.using(orm_db).get(pk=book.pk).title == f"by {side}"
    _, _, data = compare(client, orm_db, f"BookViewSet/{book.pk}/", "put", title="again", year=1999,
                         author=lib.authors[1].pk, tags=[lib.tags[0].pk])
    assert data["author"] == lib.authors[1].pk and data["tag_names"] == [lib.tags[0].name]
    created = [fetch(client, orm_db, f"/{side}/BookViewSet/", "post", title="new", year=2020,
                     author=lib.authors[0].pk, tags=[lib.tags[0].pk])[0] for side in ("plain", "batched")]
    assert [r.status_code for r in created] == [201, 201]
    assert {**created[0].json(), "id": 0} == {**created[1].json(), "id": 0}
    _, _, errors = compare(client, orm_db, "BookViewSet/", "post", title="", author=0)
    assert set(errors) == {"title", "author"}


# -- SerializerMethodField ---------------------------------------------------------------------------

def test_method_fields_returning_loader_futures_are_settled_in_the_output(client, orm_db, library):
    library(orm_db, authors=5, books=3, reviews=2)
    plain, batched, data = compare(client, orm_db, "MethodAuthors/")
    # authors; the nested books (Author.books); then the methods' futures of every level at once: the
    # related_loader of Author.books and of Book.reviews (the chain's second step finds its keys cached)
    assert batched == 1 + 1 + 2
    assert plain == 1 + 5 + 5 + 5 * (1 + 3) + 15
    assert [a["book_count"] for a in data] == [3] * 5 and all(b["review_count"] == 2 for b in data[0]["books"])
    assert data[0]["best_rating"] == 4


def test_relations_a_method_evaluates_in_place_are_answered_once_per_level(api, orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import batched_data

    class InPlaceBook(s.ModelSerializer):
        ratings = s.SerializerMethodField()

        class Meta:
            model = models.Book
            fields = ["title", "ratings"]

        def get_ratings(self, book):  # iteration of a related manager's queryset
            return [review.rating for review in book.reviews.order_by("rating", "id")]

    class InPlaceAuthor(s.ModelSerializer):
        book_count = s.SerializerMethodField()
        latest = s.SerializerMethodField()
        has_first_year = s.SerializerMethodField()
        books = InPlaceBook(many=True, read_only=True)

        class Meta:
            model = models.Author
            fields = ["name", "book_count", "latest", "has_first_year", "books"]

        def get_book_count(self, author):  # answered from the rows the walk loaded for books (a prefetch)
            return author.books.count()

        def get_latest(self, author):
            book = author.books.filter(year__gte=2001).order_by("-year", "id").first()
            return book.title if book is not None else None

        def get_has_first_year(self, author):
            return author.books.filter(year=2000).exists()

    library(orm_db, authors=5, books=3, reviews=2)
    authors = models.Author.objects.using(orm_db).order_by("id")
    with CaptureQueriesContext(connections[orm_db]) as plain:
        expected = InPlaceAuthor(authors.all(), many=True).data
    with CaptureQueriesContext(connections[orm_db]) as queries:
        assert batched_data(InPlaceAuthor(authors.all(), many=True)) == expected
    # authors; Author.books (the field); then in place, per shape for the level: the latest book, the
    # first-year exists, the books' ordered reviews
    assert len(queries) == 1 + 1 + 3
    assert len(plain) == 1 + 5 + 5 + 5 + 5 + 15
    assert expected[0]["latest"] == "book 0.2" and expected[0]["books"][0]["ratings"] == [1, 2]


def test_a_method_querying_the_manager_by_its_instance_is_answered_once_per_level(api, orm_db, library):
    """``Book.objects.filter(author=author)`` names the author by its key only: it is found among the
    walk's instances."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import batched_data

    class ManagerAuthor(s.ModelSerializer):
        early = s.SerializerMethodField()
        titles = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["name", "early", "titles"]

        def get_early(self, author):
            return models.Book.objects.using(orm_db).filter(author=author, year__lt=2002).count()

        def get_titles(self, author):
            return [b.title for b in models.Book.objects.using(orm_db).filter(author_id=author.pk).order_by("-id")]

    library(orm_db, authors=5, books=3)
    authors = models.Author.objects.using(orm_db).order_by("id")
    with CaptureQueriesContext(connections[orm_db]) as plain:
        expected = ManagerAuthor(authors.all(), many=True).data
    with CaptureQueriesContext(connections[orm_db]) as queries:
        assert batched_data(ManagerAuthor(authors.all(), many=True)) == expected
    assert (len(plain), len(queries)) == (1 + 2 * 5, 1 + 2)
    assert expected[0]["early"] == 2 and expected[0]["titles"] == ["book 0.2", "book 0.1", "book 0.0"]


# -- batched_data -------------------------------------------------------------------------------------

def test_batched_data_outside_a_view_makes_its_own_registry(api, orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models

    from dataloader_sync.rest_framework import batched_data

    library(orm_db, authors=4, books=2, reviews=1)
    authors = models.Author.objects.using(orm_db).order_by("id")
    expected = api.ser.Author(authors.all(), many=True).data
    with CaptureQueriesContext(connections[orm_db]) as queries:
        data = batched_data(api.ser.Author(authors.all(), many=True))
    assert data == expected and len(queries) == 4  # authors joined to publisher and profile; books; reviews, tags
    expected = api.ser.Author(authors.first()).data
    author = authors.first()
    with CaptureQueriesContext(connections[orm_db]) as queries:
        assert batched_data(api.ser.Author(author)) == expected
    assert len(queries) == 3 + 2  # publisher, profile, books; reviews, tags


def test_batched_loaders_are_named_after_their_relation_in_the_context_registry(api, orm_db, library):
    from orm_library import models

    from dataloader_sync.rest_framework import batched_data

    library(orm_db, authors=3, books=2, reviews=1)
    registry = DataLoaderRegistry()
    batched_data(api.ser.Author(models.Author.objects.using(orm_db).order_by("id"), many=True,
                                context={"loaders": registry}))
    stats = registry.statistics_by_loader()
    assert sorted(stats) == ["Author.books", "Book.reviews", "Book.tags"]  # publisher and profile: joined
    assert stats["Book.reviews"].batch_invoke_count == 1 and stats["Book.reviews"].load_count == 6
    registry.close()


def test_batched_data_is_the_one_line_of_an_api_view_that_builds_its_serializer(client, orm_db, library):
    library(orm_db, authors=4, books=2, reviews=1)
    plain, batched, _ = compare(client, orm_db, "OwnSerializerAuthors/")
    assert batched == 4 and plain == 1 + 3 + 4 + 4 + 8 + 8


def test_the_mixin_s_loaders_are_the_request_registry_s_named_after_their_relation(client, orm_db, library):
    library(orm_db, authors=3, books=2, reviews=1)
    body = client.get("/batched/LoaderNames/").json()
    # the root's to-one hops (publisher, profile) are joined into its queryset: no loader of their own
    assert body == {"authors": 3, "batches": {"Author.books": 1, "Book.reviews": 1, "Book.tags": 1}}


def test_batched_data_refuses_what_is_not_a_serializer():
    from dataloader_sync.rest_framework import batched_data

    with pytest.raises(TypeError, match="serializer must be a REST framework serializer"):
        batched_data({"id": 1})


# -- the test mode --------------------------------------------------------------------------------------

def test_the_test_mode_raises_on_a_statement_run_once_per_row(client, orm_db, library):
    from django.test import override_settings
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import PerRowStatementError, batched_data

    class PerRow(s.ModelSerializer):
        books = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["books"]

        def get_books(self, author):
            return [models.Review.objects.filter(book=book).count() for book in author.books.all()]

    lib = library(orm_db, authors=3, books=2, reviews=1)
    with override_settings(DATALOADER_SYNC_REST_FRAMEWORK_STRICT=True):
        assert client.get("/batched/Authors/").status_code == 200  # every relation batched: nothing per row
        assert client.get("/plain/OptedOutAuthors/").status_code == 200  # without the mixin: no test mode
        with pytest.raises(PerRowStatementError, match=r"OptedOutAuthor\(many=True\) ran this statement once per "
                                                       r"row .*FROM \"orm_library_review\""):
            client.get("/batched/OptedOutAuthors/")  # Meta.no_auto_relations: books (and their reviews) row by row
        with pytest.raises(PerRowStatementError, match=r"^PerRow ran .*orm_library_review"):
            batched_data(PerRow(lib.authors[0]))  # a method querying a model: not a relation of the level
    assert client.get("/batched/OptedOutAuthors/").status_code == 200  # the setting off again


# -- set-up mistakes ------------------------------------------------------------------------------------

def test_the_mixin_after_generic_api_view_or_on_a_plain_api_view_is_refused(api):
    from rest_framework import generics, views

    from dataloader_sync.rest_framework import AutoRelationsMixin

    with pytest.raises(TypeError, match=r"AutoRelationsMixin must come before GenericAPIView in the bases of Late"):
        type("Late", (generics.ListAPIView, AutoRelationsMixin), {})
    with pytest.raises(TypeError, match=r"which Plain \(an APIView\) has not: return Response\(batched_data"):
        type("Plain", (AutoRelationsMixin, views.APIView), {})
    type("Mine", (AutoRelationsMixin,), {})  # a mixin of one's own made of it is fine


def test_a_wrong_meta_no_auto_relations_names_itself(api, orm_db, library):
    from orm_library import models

    from dataloader_sync.rest_framework import batched_data

    library(orm_db, authors=1)
    authors = models.Author.objects.using(orm_db).all()

    class Typo(api.ser.Author):
        class Meta(api.ser.Author.Meta):
            no_auto_relations = ["bookz"]

    class NotAList(api.ser.Author):
        class Meta(api.ser.Author.Meta):
            no_auto_relations = "books"

    with pytest.raises(ValueError, match=r"Typo.Meta.no_auto_relations names 'bookz', not a field of Typo"):
        batched_data(Typo(authors, many=True))
    with pytest.raises(TypeError, match=r"NotAList.Meta.no_auto_relations must be a list or tuple of field names"):
        batched_data(NotAList(authors, many=True))


def test_a_batched_serializer_is_freed_by_reference_counting(api):
    import gc
    import weakref

    from dataloader_sync.rest_framework._views import batching

    gc.disable()
    try:
        serializer = batching(api.ser.Author())
        gone = weakref.ref(serializer)
        del serializer
        assert gone() is None  # the hook holds it weakly: no cycle through the serializer's own attribute
    finally:
        gc.enable()


def test_more_shapes_source_star_books_all_one_to_one_reverse_many_to_many_and_a_manager(api, orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import batched_data

    class BookTitle(s.ModelSerializer):
        class Meta:
            model = models.Book
            fields = ["title"]

    class AuthorOfProfile(s.ModelSerializer):
        books = BookTitle(source="books.all", many=True, read_only=True)

        class Meta:
            model = models.Author
            fields = ["name", "books"]

    class Profile(s.ModelSerializer):
        author = AuthorOfProfile(read_only=True)  # a forward one-to-one, then books through .all
        publisher = s.CharField(source="author.publisher.name", default=None)

        class Meta:
            model = models.AuthorProfile
            fields = ["bio", "author", "publisher"]

    class Flat(s.Serializer):  # source="*": the same instance, its own fields
        profile = Profile(source="*", read_only=True)
        book_count = s.IntegerField(source="author.books.count")

    class TagBooks(s.ModelSerializer):
        books = s.StringRelatedField(many=True)  # the reverse side of a many-to-many

        class Meta:
            model = models.Tag
            fields = ["name", "books"]

    library(orm_db, authors=6, books=2, tags=4)
    cases = [
        (Flat, lambda: models.AuthorProfile.objects.using(orm_db).order_by("id"), 1 + 1),
        (TagBooks, lambda: models.Tag.objects.using(orm_db).all(), 1 + 1),
    ]
    for serializer, rows, statements in cases:
        expected = serializer(rows(), many=True).data
        with CaptureQueriesContext(connections[orm_db]) as queries:
            assert batched_data(serializer(rows(), many=True)) == expected
        # profiles joined to their author and its publisher; books
        assert len(queries) == statements, serializer.__name__
    publisher = models.Publisher.objects.using(orm_db).order_by("id").first()
    expected = api.ser.Author(publisher.authors, many=True).data  # a manager: left as it is, same output
    assert batched_data(api.ser.Author(publisher.authors, many=True)) == expected
    rows = [{"id": 1, "name": "a dict", "publisher": None, "profile": None, "books": []}]
    assert batched_data(api.ser.Author(rows, many=True)) == api.ser.Author(rows, many=True).data  # not models


def test_a_many_related_field_ending_in_all_wastes_no_load_and_is_answered_in_place(api, orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import batched_data

    class Titles(s.ModelSerializer):
        titles = s.SlugRelatedField(source="books.all", slug_field="title", many=True, read_only=True)

        class Meta:
            model = models.Author
            fields = ["name", "titles"]

    library(orm_db, authors=3, books=2)
    expected = Titles(models.Author.objects.using(orm_db).order_by("id"), many=True).data
    with CaptureQueriesContext(connections[orm_db]) as queries:
        assert batched_data(Titles(models.Author.objects.using(orm_db).order_by("id"), many=True)) == expected
    # authors; ManyRelatedField calls .all() on the queryset it reaches, which no prefetch answers (so the walk
    # loads nothing for it): it is answered for the level in place, one statement
    assert len(queries) == 1 + 1


def test_an_error_of_rest_framework_is_raised_as_without_the_mixin(api, orm_db, library):
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import batched_data

    class Wrong(s.ModelSerializer):
        nickname = s.CharField(source="author.nickname")  # no such attribute: REST framework's error

        class Meta:
            model = models.Book
            fields = ["title", "nickname"]

    library(orm_db, authors=2, books=1)
    errors = []
    for serialize in (lambda w: w.data, batched_data):
        with pytest.raises(AttributeError) as caught:
            serialize(Wrong(models.Book.objects.using(orm_db).order_by("id"), many=True))
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "Got AttributeError when attempting to get a value for field `nickname`" \
        in errors[0]


def test_a_method_reading_a_to_one_of_loaded_rows_reads_it_for_their_batch(api, orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import batched_data

    class AuthorWithPublisher(s.ModelSerializer):
        publisher_name = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["name", "publisher_name"]

        def get_publisher_name(self, author):  # a to-one read in place: not a field the walk follows
            return author.publisher.name if author.publisher is not None else None

    class BookWithAuthor(s.ModelSerializer):
        author = AuthorWithPublisher(read_only=True)

        class Meta:
            model = models.Book
            fields = ["title", "author"]

    library(orm_db, authors=6, books=2)
    books = models.Book.objects.using(orm_db).order_by("id")
    expected = BookWithAuthor(books.all(), many=True).data
    with CaptureQueriesContext(connections[orm_db]) as queries:
        assert batched_data(BookWithAuthor(list(books.all()), many=True)) == expected
    # books (a list: nothing to join into); Book.author; the authors' publishers, for the level (FETCH_LEVEL on
    # Django >= 6.1, else _inplace)
    assert len(queries) == 1 + 1 + 1
    with CaptureQueriesContext(connections[orm_db]) as queries:
        assert batched_data(BookWithAuthor(books.all(), many=True)) == expected
    assert len(queries) == 1 + 1  # books joined to their author (the root queryset's join); the publishers
