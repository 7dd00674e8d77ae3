"""The ORM test app (``orm_library``): publishers, authors, books, reviews, tags and author profiles.

Installed by ``tests/django_settings.py`` (so it is migrated with the rest by
``django_example_project``, on SQLite, and on PostgreSQL by
``postgres_server.use_for_django``).  Every kind of relation the ORM loaders
handle is here, with ``related_name`` spelled out:

========================  =================================  ==============================
descriptor                kind                               value of a load
========================  =================================  ==============================
``Author.publisher``      forward foreign key, nullable      a ``Publisher`` or ``None``
``Publisher.authors``     reverse foreign key                a list of ``Author``
``Book.author``           forward foreign key                an ``Author``
``Author.books``          reverse foreign key                a list of ``Book``
``Book.reviews`` /        reverse / forward foreign key      a list of ``Review`` /
``Review.book``                                              a ``Book``
``Book.tags``             many-to-many (forward)             a list of ``Tag``
``Tag.books``             many-to-many (reverse)             a list of ``Book``
``AuthorProfile.author``  forward one-to-one                 an ``Author``
``Author.profile``        reverse one-to-one                 an ``AuthorProfile`` or ``None``
``Note.target``           generic foreign key                an ``Author``, a ``Book`` or ``None``
``Author.notes`` /        generic relation                   a list of ``Note``
``Book.notes``
========================  =================================  ==============================

No model has a ``Meta.ordering`` except ``Tag`` (by ``name``), so tests see
both an unordered related side (results in primary-key order) and a default
ordering.  ``tests/test_django_orm.py``'s ``library`` fixture fills the tables.
"""
