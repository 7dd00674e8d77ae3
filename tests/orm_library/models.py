"""Publishers publish authors; authors write books, have at most one profile; books are tagged and reviewed.

See the package docstring for the relations and what a loader of each gives.
"""
from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
from django.contrib.contenttypes.models import ContentType
from django.db import models


class Publisher(models.Model):
    name = models.CharField(max_length=200)

    def __str__(self) -> str:
        return self.name


class Author(models.Model):
    name = models.CharField(max_length=200)
    publisher = models.ForeignKey(Publisher, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="authors")
    notes = GenericRelation("Note")

    def __str__(self) -> str:
        return self.name

    @property
    def display_name(self) -> str:
        """A computed field that reads a column (deferred by ``only()``, for FETCH_LEVEL's tests)."""
        return self.name.title()

    @property
    def publisher_name(self) -> str:
        """A computed field that reads a to-one relation (FETCH_LEVEL on a resolver's queryset)."""
        return self.publisher.name if self.publisher is not None else ""

    # Computed fields that evaluate a relation in place (tests/test_django_inplace_relations.py).
    @property
    def book_count(self) -> int:
        return self.books.count()

    @property
    def has_early_books(self) -> bool:
        return self.books.filter(year__lt=2002).exists()

    @property
    def first_title(self) -> str:
        book = self.books.order_by("title").first()
        return book.title if book is not None else ""

    @property
    def latest_title(self) -> str:
        book = self.books.order_by("year", "title").last()
        return book.title if book is not None else ""

    @property
    def newest_year(self) -> "int | None":
        return self.books.aggregate(models.Max("year"))["year__max"]  # type: ignore[no-any-return]

    @property
    def recent_count(self) -> int:
        return len(self.books.filter(year__gte=2001))

    @property
    def joined_titles(self) -> str:
        return ", ".join(book.title for book in self.books.order_by("-title"))

    @property
    def book_list(self) -> list:  # type: ignore[type-arg]
        return list(self.books.order_by("-year"))

    @property
    def early_book_count(self) -> int:  # the manager's form: the parent named by its key
        return Book.objects.using(self._state.db).filter(author=self, year__lt=2002).count()


class AuthorProfile(models.Model):
    author = models.OneToOneField(Author, on_delete=models.CASCADE, related_name="profile")
    bio = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"profile of {self.author_id}"


class Tag(models.Model):
    name = models.CharField(max_length=100, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Book(models.Model):
    title = models.CharField(max_length=200)
    year = models.PositiveIntegerField(default=2000)
    author = models.ForeignKey(Author, on_delete=models.CASCADE, related_name="books")
    tags = models.ManyToManyField(Tag, blank=True, related_name="books")
    notes = GenericRelation("Note")

    def __str__(self) -> str:
        return self.title

    @property
    def review_count(self) -> int:
        """Evaluates a relation in place (tests/test_django_inplace_relations.py)."""
        return self.reviews.count()


class Review(models.Model):
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="reviews")
    rating = models.PositiveSmallIntegerField()
    body = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.rating}/5 for {self.book_id}"


class Note(models.Model):
    """A note on any row: an author or a book (a generic foreign key and its generic relations)."""

    content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)
    object_id = models.PositiveBigIntegerField()
    target = GenericForeignKey("content_type", "object_id")
    text = models.CharField(max_length=200)

    def __str__(self) -> str:
        return self.text
