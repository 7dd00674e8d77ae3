"""A few authors, books and reviews, so that the example answers queries at once."""
from django.db import migrations

SAMPLE = {
    "Ursula K. Le Guin": {
        "A Wizard of Earthsea": [(5, "Still the best school for wizards.")],
        "The Dispossessed": [(5, "An ambiguous utopia, unambiguously good."), (4, "")],
    },
    "Italo Calvino": {
        "Invisible Cities": [(5, "Fifty-five cities, one Venice.")],
        "If on a winter's night a traveler": [(4, "You are reading a review.")],
    },
    "Stanisław Lem": {
        "Solaris": [(5, "The ocean thinks.")],
    },
}


def add_sample(apps, schema_editor):
    Author = apps.get_model("books", "Author")
    Book = apps.get_model("books", "Book")
    Review = apps.get_model("books", "Review")
    for name, books in SAMPLE.items():
        author = Author.objects.create(name=name)
        for title, reviews in books.items():
            book = Book.objects.create(title=title, author=author)
            Review.objects.bulk_create(Review(book=book, rating=r, body=b) for r, b in reviews)


def remove_sample(apps, schema_editor):
    apps.get_model("books", "Author").objects.filter(name__in=list(SAMPLE)).delete()


class Migration(migrations.Migration):
    dependencies = [("books", "0001_initial")]
    operations = [migrations.RunPython(add_sample, remove_sample)]
