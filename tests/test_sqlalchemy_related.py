"""dataloader_sync.sqlalchemy.load_related: every kind of relationship, one statement per batch.

Real SQLAlchemy 2 ORM on each database of ``sqlalchemy_helpers.DATABASES``;
every test asserts the values (against SQLAlchemy's own lazy loading in a
separate session, where a rule is not simpler to state) and the number of
statements the batch sent.
"""
from __future__ import annotations

import functools

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")

from sqlalchemy import ForeignKey, select  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, load_only, mapped_column, relationship  # noqa: E402
from sqlalchemy.orm.exc import DetachedInstanceError  # noqa: E402
from sqlalchemy_helpers import (  # noqa: E402
    Author,
    Book,
    Profile,
    Publisher,
    Review,
    Tag,
    catalogue,  # noqa: F401
    database_url,  # noqa: F401
    engine,  # noqa: F401
    postgres_url,  # noqa: F401
)

from dataloader_sync import DataLoader  # noqa: E402
from dataloader_sync.sqlalchemy import load_related  # noqa: E402


def _all(session: Session, model):
    return session.scalars(select(model).order_by(model.id)).all()


def _ids(values):
    return [[v.id for v in value] if isinstance(value, list) else (value and value.id) for value in values]


def _expected(engine, model, attribute: str):
    """What SQLAlchemy's own lazy loads give, per instance in id order, as ids (sorted sets for to-many)."""
    with Session(engine) as other:
        return _ids(getattr(obj, attribute) for obj in _all(other, model))


def test_load_related_many_to_one_one_statement_and_none_foreign_keys_without_sql(catalogue, engine):
    session, statements = catalogue
    books = _all(session, Book)
    statements.reset()
    authors = load_related(books, Book.author)
    assert statements.count == 1
    assert [a.id if a else None for a in authors] == [b.author_id for b in books]
    assert authors[-1] is None  # the book without an author
    assert all(a is None or sqlalchemy.inspect(a).session is session for a in authors)
    # Only None foreign keys: no statement at all.
    statements.reset()
    assert load_related([books[-1]], Book.author) == [None]
    assert statements.count == 0


def test_load_related_many_to_one_uses_the_identity_map(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    authors = {a.id: a for a in _all(session, Author)}
    statements.reset()
    found = load_related(books, Book.author)
    assert statements.count == 0
    assert all(f is authors.get(b.author_id) for f, b in zip(found, books))


def test_load_related_many_to_one_queries_expired_identity_map_objects_once(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    authors = _all(session, Author)
    session.expire(authors[0])
    statements.reset()
    found = load_related(books, Book.author)
    assert statements.count == 1  # the expired one, in the batch's statement (not one refresh per book)
    assert found[0] is authors[0] and found[0].name == "author 1"
    assert statements.count == 1


def test_load_related_many_to_one_already_loaded_on_the_instance_costs_nothing(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    first = books[0].author  # a lazy load
    session.expunge(first)  # not in the identity map any more; still books[0].author
    statements.reset()
    assert load_related([books[0]], Book.author) == [first]
    assert statements.count == 0


def test_load_related_one_to_many_ordered_by_the_relationship_order_by(catalogue, engine):
    session, statements = catalogue
    authors = _all(session, Author)
    statements.reset()
    books = load_related(authors, Author.books)
    assert statements.count == 1
    assert _ids(books) == _expected(engine, Author, "books")
    titles = [[b.title for b in value] for value in books]
    assert titles == [sorted(t) for t in titles] and titles[0] == ["book 1.0", "book 1.1", "book 1.2"]
    ids = [[b.id for b in value] for value in books]
    assert ids[0] != sorted(ids[0])  # title order is not id order here: order_by was applied


def test_load_related_one_to_many_without_order_by_is_ordered_by_primary_key_and_empty_lists(catalogue, engine):
    session, statements = catalogue
    session.add(Publisher(id=99, name="empty"))
    session.flush()
    publishers, books = _all(session, Publisher), _all(session, Book)
    statements.reset()
    authors = load_related(publishers, Publisher.authors)
    assert statements.count == 1
    assert _ids(authors) == [[1, 3], [2], []]
    reviews = load_related(books, Book.reviews)
    assert statements.count == 2
    assert all(ids == sorted(ids) for ids in _ids(reviews)) and reviews[-1] == []
    assert [len(r) for r in reviews[:-1]] == [2] * 12


def test_load_related_many_to_many_both_sides(catalogue, engine):
    session, statements = catalogue
    books, tags = _all(session, Book), _all(session, Tag)
    statements.reset()
    book_tags = load_related(books, Book.tags)
    assert statements.count == 1
    tag_books = load_related(tags, Tag.books)
    assert statements.count == 2
    # Book.tags has no order_by: tag id order; Tag.books orders by title, descending.
    assert _ids(book_tags) == [sorted(ids) for ids in _expected(engine, Book, "tags")]
    assert _ids(tag_books) == _expected(engine, Tag, "books")
    assert [b.title for b in tag_books[0]] == sorted((b.title for b in tag_books[0]), reverse=True)
    assert book_tags[-1] == [] and all(book_tags[:-1])


def test_load_related_one_to_one_both_sides(catalogue):
    session, statements = catalogue
    authors = _all(session, Author)
    statements.reset()
    profiles = load_related(authors, Author.profile)
    assert statements.count == 1
    assert [p.id if p else None for p in profiles] == [None, 2, None, 4]
    profile_list = _all(session, Profile)
    statements.reset()
    back = load_related(profile_list, Profile.author)
    assert statements.count == 0  # the authors are in the identity map
    assert back == [authors[1], authors[3]]


def test_load_related_results_do_not_touch_the_instances_own_collections(catalogue):
    session, statements = catalogue
    authors = _all(session, Author)
    books = load_related(authors, Author.books)
    books[0].clear()
    assert "books" not in sqlalchemy.inspect(authors[0]).dict
    statements.reset()
    assert len(load_related(authors, Author.books)[0]) == 3


def test_load_related_a_batch_with_repeated_and_mixed_keys(catalogue):
    session, statements = catalogue
    authors = _all(session, Author)
    statements.reset()
    books = load_related([authors[1], authors[0], authors[1]], Author.books)
    assert statements.count == 1
    assert _ids(books)[0] == _ids(books)[2] and books[0] is not books[2]


def test_load_related_instances_of_another_class_fail_alone(catalogue):
    session, statements = catalogue
    books, review = _all(session, Book), _all(session, Review)[0]
    statements.reset()
    out = load_related([books[0], "a string", review], Book.author)
    assert statements.count == 1
    assert out[0].id == books[0].author_id
    assert isinstance(out[1], TypeError) and "Book.author loads Book instances, got str" in str(out[1])
    assert isinstance(out[2], TypeError)


def test_load_related_detached_instances_fail_alone_without_session(catalogue):
    session, statements = catalogue
    authors = _all(session, Author)
    session.expunge(authors[0])
    statements.reset()
    out = load_related(authors, Author.books)
    assert statements.count == 1
    assert isinstance(out[0], DetachedInstanceError) and "pass session=" in str(out[0])
    assert [len(b) for b in out[1:]] == [3, 3, 3]


def test_load_related_detached_instances_load_with_session(catalogue, engine):
    session, statements = catalogue
    authors = _all(session, Author)
    session.expunge_all()
    with Session(engine) as other:
        statements.reset()
        out = load_related(authors, Author.books, session=other)
        assert statements.count == 1
        assert all(sqlalchemy.inspect(b).session is other for books in out for b in books)
        assert [len(b) for b in out] == [3, 3, 3, 3]


def test_load_related_instances_of_another_session_fail_alone(catalogue, engine):
    session, statements = catalogue
    authors = _all(session, Author)
    with Session(engine) as other:
        stranger = other.get(Author, 2)
        statements.reset()
        out = load_related([authors[0], stranger], Author.books)
        assert statements.count == 1
        assert len(out[0]) == 3
        assert isinstance(out[1], ValueError) and "another session" in str(out[1])
        # With session= given, an instance of any other session is refused.
        statements.reset()
        out = load_related([authors[0], stranger], Author.books, session=other)
        assert isinstance(out[0], ValueError) and len(out[1]) == 3
        assert statements.count == 1


def test_load_related_pending_parents_have_nothing_related(catalogue):
    session, statements = catalogue
    new_author = Author(name="new")
    session.add(new_author)
    statements.reset()
    assert load_related([new_author], Author.books) == [[]]
    assert statements.count == 0


def test_load_related_expired_parents_are_read_from_their_identity(catalogue):
    session, statements = catalogue
    authors = _all(session, Author)
    session.expire_all()
    statements.reset()
    out = load_related(authors, Author.books)
    assert statements.count == 1  # no refresh of the authors: their keys are their identities
    assert [len(b) for b in out] == [3, 3, 3, 3]


def test_load_related_deferred_foreign_keys_cost_one_statement_for_all_parents(catalogue):
    session, statements = catalogue
    books = session.scalars(select(Book).options(load_only(Book.title)).order_by(Book.id)).all()
    assert all("author_id" not in sqlalchemy.inspect(b).dict for b in books)
    statements.reset()
    authors = load_related(books, Book.author)
    assert statements.count == 2  # the books' author_id, then the authors; not one refresh per book
    with Session(session.get_bind()) as other:
        expected = [b.author_id for b in _all(other, Book)]
    assert [a.id if a else None for a in authors] == expected
    assert all("author_id" not in sqlalchemy.inspect(b).dict for b in books)  # the instances are not changed
    statements.reset()
    load_related(books, Book.author)
    assert statements.count == 1  # the authors are in the identity map now: only the keys


def test_load_related_some_expired_foreign_keys_among_loaded_ones(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    for book in books[::2]:
        session.expire(book, ["author_id"])
    statements.reset()
    authors = load_related(books, Book.author)
    assert statements.count == 2
    assert [a.id if a else None for a in authors] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, None]


def test_load_related_through_a_dataloader_is_one_batch(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    loader = DataLoader(functools.partial(load_related, attribute=Book.author))
    statements.reset()
    futures = [loader.load(b) for b in books]
    loader.dispatch_and_join()
    assert statements.count == 1
    assert [f.result().id if f.result() else None for f in futures] == [b.author_id for b in books]


class _OtherBase(DeclarativeBase):
    pass


class _Shelf(_OtherBase):
    __tablename__ = "shelf"
    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str]
    short_items: Mapped[list[_Item]] = relationship(
        primaryjoin="and_(_Shelf.id == _Item.shelf_id, _Item.size < 3)", viewonly=True)


class _Item(_OtherBase):
    __tablename__ = "item"
    id: Mapped[int] = mapped_column(primary_key=True)
    size: Mapped[int]
    shelf_id: Mapped[int] = mapped_column(ForeignKey("shelf.id"))


def test_load_related_refuses_relationships_with_more_than_column_equalities():
    with pytest.raises(ValueError, match=r"_Shelf.short_items: only relationships joined by column equalities"):
        load_related([], _Shelf.short_items)


@pytest.mark.parametrize("attribute", [Book.title, "Book.author", None, Book])
def test_load_related_refuses_what_is_not_a_relationship_attribute(attribute):
    with pytest.raises(TypeError, match="attribute must be a relationship attribute such as Book.author"):
        load_related([], attribute)


def test_load_related_refuses_a_session_of_the_wrong_type():
    with pytest.raises(TypeError, match="session must be a Session, a scoped_session or a sessionmaker or None"):
        load_related([], Book.author, session="default")
