"""A Flask-SQLAlchemy app with graphene: SQLAlchemy loaders through Flask's test client.

The app is what docs/sqlalchemy.rst shows: ``db = SQLAlchemy(model_class=Base)``,
a registry per request (``DataLoaders``), ``graphql_view`` executing with
``DataLoaderExecutionContext``, resolvers returning ``related_loader(...)``
and ``model_loader(...)`` futures on ``db.session`` (a ``scoped_session``)
or the instances' own session.  A three-level query costs five statements
(authors, their publishers, books, reviews, tags) whatever the number of
authors, on SQLite and on PostgreSQL.
"""
from __future__ import annotations

import pytest

flask = pytest.importorskip("flask")
graphene = pytest.importorskip("graphene")
flask_sqlalchemy = pytest.importorskip("flask_sqlalchemy")

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402
from sqlalchemy_helpers import (  # noqa: E402
    Author,
    Base,
    Book,
    Publisher,
    Statements,
    database_url,  # noqa: F401
    fill,
    postgres_url,  # noqa: F401
)

from dataloader_sync import DataLoaderRegistry, ScheduledDataLoaderRegistry  # noqa: E402
from dataloader_sync.flask import DataLoaders, graphql_view  # noqa: E402
from dataloader_sync.sqlalchemy import model_loader, related_loader  # noqa: E402

QUERY = """
query ($limit: Int!) {
  authors(limit: $limit) {
    name
    publisher { name }
    books { title reviews { rating } tags { name } }
  }
}
"""


def make_app(url: str, registry_factory=DataLoaderRegistry):
    db = flask_sqlalchemy.SQLAlchemy(model_class=Base)

    class TagType(graphene.ObjectType):
        name = graphene.String()

    class ReviewType(graphene.ObjectType):
        rating = graphene.Int()

    class BookType(graphene.ObjectType):
        title = graphene.String()
        reviews = graphene.List(ReviewType)
        tags = graphene.List(TagType)

        @staticmethod
        def resolve_reviews(book, info):
            return related_loader(info.context.loaders, Book.reviews).load(book)  # the book's own session

        @staticmethod
        def resolve_tags(book, info):
            return related_loader(info.context.loaders, Book.tags, session=db.session).load(book)

    class PublisherType(graphene.ObjectType):
        name = graphene.String()

    class AuthorType(graphene.ObjectType):
        name = graphene.String()
        publisher = graphene.Field(PublisherType)
        books = graphene.List(BookType)
        latest_books = graphene.List(BookType, first=graphene.Int(required=True), title_not=graphene.String())

        @staticmethod
        def resolve_latest_books(author, info, first, title_not=None):
            where = None if title_not is None else Book.title != title_not
            loader = related_loader(info.context.loaders, Author.books, where=where,
                                    order_by=Book.title.desc(), first=first)
            return loader.load(author)

        @staticmethod
        def resolve_publisher(author, info):
            return model_loader(info.context.loaders, Publisher, session=db.session).load(author.publisher_id)

        @staticmethod
        def resolve_books(author, info):
            return related_loader(info.context.loaders, Author.books).load(author)

    class Query(graphene.ObjectType):
        authors = graphene.List(AuthorType, limit=graphene.Int(required=True))

        @staticmethod
        def resolve_authors(root, info, limit):
            return db.session.scalars(select(Author).order_by(Author.id).limit(limit)).all()

    app = flask.Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = url
    db.init_app(app)
    DataLoaders(app, factory=registry_factory)
    app.add_url_rule("/graphql", view_func=graphql_view(graphene.Schema(query=Query)))
    return app, db


@pytest.fixture
def flask_app(database_url):
    app, db = make_app(database_url)
    with app.app_context():
        db.drop_all()
        db.create_all()
        fill(db.session, authors=12, books=3, reviews=2)
        db.session.remove()
        statements = Statements(db.engine)
    try:
        yield app, db, statements
    finally:
        with app.app_context():
            statements.close()
            db.drop_all()
            db.session.remove()
            db.engine.dispose()


def _expected(engine, limit: int):
    """The answer from SQLAlchemy's own lazy loads: reviews and tags in primary-key order, books by title."""
    with Session(engine) as session:
        authors = session.scalars(select(Author).order_by(Author.id).limit(limit)).all()
        return [
            {
                "name": a.name,
                "publisher": a.publisher and {"name": a.publisher.name},
                "books": [
                    {"title": b.title,
                     "reviews": [{"rating": r.rating} for r in sorted(b.reviews, key=lambda r: r.id)],
                     "tags": [{"name": t.name} for t in sorted(b.tags, key=lambda t: t.id)]}
                    for b in a.books
                ],
            }
            for a in authors
        ]


@pytest.mark.parametrize("limit", [2, 12])
def test_flask_sqlalchemy_three_levels_cost_five_statements_whatever_the_number_of_authors(flask_app, limit):
    app, db, statements = flask_app
    with app.test_client() as client:
        statements.reset()
        response = client.post("/graphql", json={"query": QUERY, "variables": {"limit": limit}})
        count = statements.count
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert "errors" not in body
    with app.app_context():
        expected = _expected(db.engine, limit)
        assert db.engine.pool.checkedout() == 0  # db.session was removed at teardown
    assert body["data"]["authors"] == expected
    assert len(expected) == limit and all(a["books"] for a in expected)
    assert expected[-1]["publisher"] is None or limit < 12  # the last author has no publisher
    assert count == 5


@pytest.mark.parametrize("limit", [2, 12])
def test_flask_sqlalchemy_field_arguments_become_criteria_in_one_statement_per_field(flask_app, limit):
    app, db, statements = flask_app
    query = """query ($limit: Int!) { authors(limit: $limit) {
        name
        latest: latestBooks(first: 2) { title }
        others: latestBooks(first: 2, titleNot: "book 1.2") { title reviews { rating } }
    } }"""
    with app.test_client() as client:
        statements.reset()
        response = client.post("/graphql", json={"query": query, "variables": {"limit": limit}})
        count = statements.count
    body = response.get_json()
    assert response.status_code == 200 and "errors" not in body, body
    authors = body["data"]["authors"]
    assert len(authors) == limit
    assert authors[0]["latest"] == [{"title": "book 1.2"}, {"title": "book 1.1"}]
    assert [b["title"] for b in authors[0]["others"]] == ["book 1.1", "book 1.0"]
    assert authors[1]["others"] == [{"title": t, "reviews": [{"rating": r} for r in rs]}
                                    for t, rs in (("book 2.2", [3, 4]), ("book 2.1", [5, 1]))]
    assert count == 4  # authors, the two latestBooks fields (two families), reviews


def test_flask_sqlalchemy_each_request_gets_fresh_loaders(flask_app):
    app, db, statements = flask_app
    with app.test_client() as client:
        statements.reset()
        for _ in range(3):
            response = client.post("/graphql", json={"query": QUERY, "variables": {"limit": 3}})
            assert response.status_code == 200 and "errors" not in response.get_json()
    assert statements.count == 15  # nothing cached across requests: five statements each


def test_flask_sqlalchemy_with_a_scheduled_registry_without_ticker_mode(database_url):
    app, db = make_app(database_url, registry_factory=ScheduledDataLoaderRegistry)
    with app.app_context():
        db.drop_all()
        db.create_all()
        fill(db.session, authors=4)
        db.session.remove()
        statements = Statements(db.engine)
    try:
        with app.test_client() as client:
            response = client.post("/graphql", json={"query": QUERY, "variables": {"limit": 4}})
        assert response.status_code == 200 and "errors" not in response.get_json()
        assert statements.count == 5
        with app.app_context():
            assert response.get_json()["data"]["authors"] == _expected(db.engine, 4)
    finally:
        with app.app_context():
            statements.close()
            db.drop_all()
            db.session.remove()
            db.engine.dispose()
