"""Shared by the SQLAlchemy tests: the models, sample data and a statement counter.

The models are a small catalogue: publishers, authors (each with at most one
profile), books (with tags through ``book_tags``) and reviews.  ``Author.book_query`` and
``Book.tag_query`` are the same relations as ``lazy="dynamic"`` queries (view-only).  Foreign keys
of authors and books may be ``NULL``.  ``Statements(engine)`` counts every
statement the engine sends to the database (a ``before_cursor_execute``
listener), so each test asserts what its loads cost.

Fixtures (import them by name, with ``postgres_url``): ``database_url``
(parametrized over the databases: a SQLite file, and a database of the test
PostgreSQL server), ``engine`` and ``catalogue``.
"""
from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any, Optional

import pytest
from sqlalchemy import Column, ForeignKey, Integer, String, Table, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, DynamicMapped, Mapped, Session, mapped_column, relationship


class Base(DeclarativeBase):
    pass


book_tags = Table(
    "book_tags",
    Base.metadata,
    Column("book_id", ForeignKey("book.id"), primary_key=True),
    Column("tag_id", ForeignKey("tag.id"), primary_key=True),
)


class Publisher(Base):
    __tablename__ = "publisher"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    authors: Mapped[list[Author]] = relationship(back_populates="publisher")  # no order_by: by id


class Author(Base):
    __tablename__ = "author"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    email: Mapped[Optional[str]] = mapped_column(String(100), unique=True)
    publisher_id: Mapped[Optional[int]] = mapped_column(ForeignKey("publisher.id"))
    publisher: Mapped[Optional[Publisher]] = relationship(back_populates="authors")
    books: Mapped[list[Book]] = relationship(back_populates="author", order_by="Book.title")
    profile: Mapped[Optional[Profile]] = relationship(back_populates="author", uselist=False)
    # the same books as a query (lazy="dynamic"), for resolvers that filter, order and slice it
    book_query: DynamicMapped[Book] = relationship(lazy="dynamic", viewonly=True)

    def __repr__(self) -> str:
        return f"<Author {self.id}>"


class Profile(Base):
    __tablename__ = "profile"
    id: Mapped[int] = mapped_column(primary_key=True)
    bio: Mapped[str] = mapped_column(String(200))
    author_id: Mapped[int] = mapped_column(ForeignKey("author.id"), unique=True)
    author: Mapped[Author] = relationship(back_populates="profile")


class Book(Base):
    __tablename__ = "book"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(100))
    year: Mapped[Optional[int]] = mapped_column(Integer)
    author_id: Mapped[Optional[int]] = mapped_column(ForeignKey("author.id"))
    author: Mapped[Optional[Author]] = relationship(back_populates="books")
    tags: Mapped[list[Tag]] = relationship(secondary=book_tags, back_populates="books")
    tag_query: DynamicMapped[Tag] = relationship(secondary=book_tags, lazy="dynamic", viewonly=True)
    reviews: Mapped[list[Review]] = relationship(back_populates="book")

    def __repr__(self) -> str:
        return f"<Book {self.id}>"


class Tag(Base):
    __tablename__ = "tag"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    books: Mapped[list[Book]] = relationship(secondary=book_tags, back_populates="tags",
                                             order_by="Book.title.desc()")


class Review(Base):
    __tablename__ = "review"
    id: Mapped[int] = mapped_column(primary_key=True)
    rating: Mapped[int] = mapped_column(Integer)
    book_id: Mapped[int] = mapped_column(ForeignKey("book.id"))
    book: Mapped[Book] = relationship(back_populates="reviews")


class Statements:
    """Records the SQL statements an engine runs, and on which threads.

    Thread-safe: the listener may run on any thread.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()  # guards sql and threads
        self.sql: list[str] = []
        self.threads: list[int] = []
        event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        with self._lock:
            self.sql.append(statement)
            self.threads.append(threading.get_ident())

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.sql)

    def reset(self) -> None:
        with self._lock:
            self.sql.clear()
            self.threads.clear()

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._record)


def fill(session: Session, *, publishers: int = 2, authors: int = 4, books: int = 3, reviews: int = 2,
         tags: int = 3) -> None:
    """Add the sample catalogue and commit.

    Publisher ``p`` (ids from 1) has the authors ``a`` with ``a % publishers == p - 1``, except
    the last author, who has none.  Author ``a`` has ``books`` books titled ``"book {a}.{b}"``,
    added in reverse title order (so id order and title order differ); odd authors have a
    profile.  Book ``(a, b)`` is of the year ``2000 + min(b, 1)`` (its last two tie), and has
    ``reviews`` reviews and the tags ``t`` with ``(a + b + t) % 2 == 0``.  One more book has no
    author.
    """
    pubs = [Publisher(id=p + 1, name=f"publisher {p + 1}") for p in range(publishers)]
    all_tags = [Tag(id=t + 1, name=f"tag {t + 1}") for t in range(tags)]
    session.add_all(pubs + all_tags)
    book_id = review_id = 0
    for a in range(authors):
        publisher_id = None if a == authors - 1 else pubs[a % publishers].id
        author = Author(id=a + 1, name=f"author {a + 1}", email=f"a{a + 1}@example.com",
                        publisher_id=publisher_id)
        session.add(author)
        if a % 2 == 1:
            session.add(Profile(id=a + 1, bio=f"bio {a + 1}", author_id=a + 1))
        for b in reversed(range(books)):
            book_id += 1
            book = Book(id=book_id, title=f"book {a + 1}.{b}", year=2000 + min(b, 1), author_id=a + 1)
            book.tags = [tag for t, tag in enumerate(all_tags) if (a + b + t) % 2 == 0]
            session.add(book)
            for _ in range(reviews):
                review_id += 1
                session.add(Review(id=review_id, rating=1 + review_id % 5, book_id=book_id))
    session.add(Book(id=book_id + 1, title="anonymous", author_id=None))
    session.commit()


DATABASES = ["sqlite", "postgresql"]
_databases = itertools.count(1)


def _sqlite_url(tmp_path: Any) -> str:
    return f"sqlite:///{tmp_path / 'catalogue.db'}"


@pytest.fixture(scope="module")
def postgres_url(postgres_server: Any) -> str:
    """A SQLAlchemy URL (psycopg 3) of a new database on the test PostgreSQL server (see ``postgres_server``)."""
    name = postgres_server.create_database(f"dataloader_sync_sqlalchemy_{next(_databases)}")
    return f"postgresql+psycopg://{postgres_server.user}@{postgres_server.host}:{postgres_server.port}/{name}"


@pytest.fixture(params=DATABASES)
def database_url(request: Any, tmp_path: Any) -> str:
    """The URL of an empty database: a SQLite file, or a database of the test PostgreSQL server."""
    url: str = _sqlite_url(tmp_path) if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on an empty catalogue schema (dropped after) of ``database_url``."""
    made = create_engine(database_url)
    Base.metadata.drop_all(made)
    Base.metadata.create_all(made)
    try:
        yield made
    finally:
        Base.metadata.drop_all(made)
        made.dispose()


@pytest.fixture
def catalogue(engine: Engine) -> Iterator[tuple[Session, Statements]]:
    """``(session, statements)``: a session on the filled sample catalogue, and its engine's statement counter."""
    with Session(engine) as setup:
        fill(setup)
    statements = Statements(engine)
    try:
        with Session(engine) as session:
            yield session, statements
    finally:
        statements.close()
