"""What a relationship attribute needs to be loaded in batches: a ``Relation``.

A ``Relation`` is computed once per relationship (and cached): the parent's
key columns (whose values on an instance say what to load), the columns
selected beside the related entity to match each row to its parent, the
join through a ``secondary`` table, the order of to-many lists.

- many-to-one (``Book.author``): the key is the parent's foreign key
  (``book.author_id``), matched against the referenced columns
  (``author.id``); when those are the related primary key, the identity map
  can answer without SQL.
- one-to-many (``Author.books``) and one-to-one (``uselist=False``): the key
  is the parent's referenced columns (``author.id``), matched against the
  related foreign key (``book.author_id``).
- many-to-many (``Book.tags`` through ``secondary``): the key is the
  parent's columns (``book.id``), matched against the secondary table's
  (``book_tags.book_id``), joined to the related table by the
  ``secondaryjoin``.

Guarantees:
- Relationships whose join conditions are anything but column equalities
  (a ``primaryjoin`` with a literal or a function) are refused with a
  ``ValueError`` naming the attribute: loading them from the key columns
  alone would return rows the relationship does not hold.
- Order of to-many lists: the relationship's ``order_by`` if set, then the
  related primary key (so ties and relationships without ``order_by`` get a
  stable order).
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from sqlalchemy import func, select
from sqlalchemy.orm import Mapper, RelationshipDirection, RelationshipProperty, aliased
from sqlalchemy.orm.attributes import QueryableAttribute
from sqlalchemy.sql import operators, visitors
from sqlalchemy.sql.elements import (
    BinaryExpression,
    BooleanClauseList,
    ColumnClause,
    ColumnElement,
    Grouping,
)
from sqlalchemy.sql.selectable import FromClause, Select

from ._criteria import Criteria

__all__ = ["Relation", "relation_of"]


class Relation:
    """How to batch-load one relationship attribute.  Immutable, so thread-safe.

    Attributes:
        prop: the relationship property.
        name: ``"Book.author"``, for messages.
        key: the attribute's name on the parent (``"author"``).
        parent: the parent's mapper; instances loaded through the attribute
            must be of its class.
        target: the related mapper.
        to_many: the value is a list (``uselist=True``).
        parent_attrs: the names of the parent's attributes holding the key.
        parent_pk_attrs: the names of the parent's primary-key attributes.
        parent_is_identity: *parent_attrs* are the parent's primary key, in
            order (read from the instance's identity when expired).
        match_columns: the columns selected beside the related entity, one
            per key value.
        identity: many-to-one whose *match_columns* are the related primary
            key, in order: the identity map may answer.
    """

    __slots__ = (
        "prop", "name", "key", "parent", "target", "to_many", "parent_attrs", "parent_pk_attrs", "parent_is_identity",
        "match_columns", "identity", "_secondary", "_secondaryjoin", "_own_order", "_pk",
    )

    def __init__(self, attribute: QueryableAttribute[Any]) -> None:
        prop = attribute.property
        assert isinstance(prop, RelationshipProperty)
        self.prop: RelationshipProperty[Any] = prop
        self.name = str(attribute)
        self.key: str = prop.key
        self.parent: Mapper[Any] = prop.parent
        self.target: Mapper[Any] = prop.mapper
        self.to_many = bool(prop.uselist)
        self._secondary: Optional[FromClause] = None
        self._secondaryjoin: Optional[ColumnElement[bool]] = None
        joins = [prop.primaryjoin]
        if prop.direction is RelationshipDirection.MANYTOMANY:
            assert prop.secondary is not None and prop.secondaryjoin is not None
            pairs = list(prop.synchronize_pairs)  # (parent column, secondary column)
            self._secondary = prop.secondary
            self._secondaryjoin = prop.secondaryjoin
            joins.append(prop.secondaryjoin)
        else:
            pairs = list(prop.local_remote_pairs)  # (parent column, related column)
        for join in joins:
            if not _only_column_equalities(join):
                raise ValueError(
                    f"{self.name}: only relationships joined by column equalities can be batch-loaded "
                    f"(this one is joined on {join}); write a batch function for it"
                )
        pk = list(self.target.primary_key)
        self.identity = (
            prop.direction is RelationshipDirection.MANYTOONE and len(pairs) == len(pk)
            and {id(remote) for _, remote in pairs} == {id(col) for col in pk}
        )
        if self.identity:  # the order of the primary key, for identity keys
            by_remote = {id(remote): local for local, remote in pairs}
            pairs = [(by_remote[id(col)], col) for col in pk]
        attrs = []
        for local, _ in pairs:
            try:
                attrs.append(self.parent.get_property_by_column(local).key)
            except Exception:  # an unmapped column (sqlalchemy raises UnmappedColumnError)
                cls = self.parent.class_.__name__
                raise ValueError(f"{self.name}: column {local} is not mapped on {cls}") from None
        self.parent_attrs = tuple(attrs)
        self.parent_pk_attrs = tuple(self.parent.get_property_by_column(col).key for col in self.parent.primary_key)
        self.parent_is_identity = self.parent_attrs == self.parent_pk_attrs
        self.match_columns: tuple[ColumnElement[Any], ...] = tuple(remote for _, remote in pairs)
        self._own_order: tuple[Any, ...] = tuple(prop.order_by or ())
        self._pk = tuple(pk)

    def order(self, criteria: Criteria) -> list[Any]:
        """The list order: *criteria*'s ``order_by`` or the relationship's, then the related primary key."""
        order = list(self._own_order if criteria.order_by is None else criteria.order_by)
        return order + [col for col in self._pk if not any(col is o for o in order)]

    def statement(self, key_clause: ColumnElement[bool], criteria: Criteria) -> Select[Any]:
        """``SELECT related, match columns`` (joined through ``secondary``) for the keys of *key_clause*.

        Rows come in list order (for to-one too: a one-to-one with several
        rows for one parent then gives the first, the same one every time).
        With ``criteria.first``, each parent's rows are numbered in that order
        by ``row_number() OVER (PARTITION BY match columns ...)`` in a
        subquery, and only the first N are selected.
        """
        order = self.order(criteria)
        if criteria.first is None:
            stmt = self._from(select(self.target.class_, *self.match_columns))
            return stmt.where(key_clause, *criteria.where).order_by(*order)
        labels = [col.label(f"dataloader_key_{i}") for i, col in enumerate(self.match_columns)]
        row = func.row_number().over(partition_by=list(self.match_columns), order_by=order)
        inner = self._from(select(self.target.class_, *labels, row.label("dataloader_row")))
        sub = inner.where(key_clause, *criteria.where).subquery()
        entity = aliased(self.target.class_, sub)
        keys = [sub.c[label.name] for label in labels]
        return select(entity, *keys).where(sub.c.dataloader_row <= criteria.first).order_by(sub.c.dataloader_row)

    def _from(self, stmt: Select[Any]) -> Select[Any]:
        if self._secondary is None:
            return stmt
        return stmt.select_from(self.target.class_).join(self._secondary, self._secondaryjoin)

    def __repr__(self) -> str:
        return f"<Relation {self.name}>"


def _only_column_equalities(clause: ColumnElement[Any]) -> bool:
    """True when *clause* is ``a = b AND c = d ...`` over columns only."""
    for element in visitors.iterate(clause):
        if isinstance(element, BinaryExpression):
            if element.operator is not operators.eq:
                return False
            if not (isinstance(element.left, ColumnClause) and isinstance(element.right, ColumnClause)):
                return False
        elif isinstance(element, BooleanClauseList):
            if element.operator is not operators.and_:
                return False
        elif not isinstance(element, (ColumnClause, Grouping)):
            return False
    return True


# _plans_lock guards _plans (relationship property -> its Relation); a
# Relation is built outside it (introspection only) and the first one stored
# wins.  A Relation holds its property, so entries live as long as the
# process, as mappers do.
_plans_lock = threading.Lock()
_plans: dict[RelationshipProperty[Any], Relation] = {}


def relation_of(attribute: Any, parameter: str = "attribute") -> Relation:
    """The ``Relation`` of a relationship attribute such as ``Book.author``.

    Raises:
        TypeError: *attribute* is not a mapped relationship attribute.
        ValueError: the relationship cannot be batch-loaded (see the module).
    """
    prop = getattr(attribute, "property", None) if isinstance(attribute, QueryableAttribute) else None
    if not isinstance(prop, RelationshipProperty):
        raise TypeError(
            f"{parameter} must be a relationship attribute such as Book.author, got {attribute!r}"
        )
    with _plans_lock:
        relation = _plans.get(prop)
    if relation is None:
        made = Relation(attribute)
        with _plans_lock:
            relation = _plans.setdefault(prop, made)
    return relation
