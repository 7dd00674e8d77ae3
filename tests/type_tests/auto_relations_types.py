"""no_auto_relations returns the field it is given, with its type; a class is refused at run time only."""
from __future__ import annotations

from typing_extensions import assert_type

from dataloader_sync import no_auto_relations


class Field:
    """A field of some framework: anything that can be marked."""

    def __init__(self, name: str) -> None:
        self.name = name


field = no_auto_relations(Field("books"))
assert_type(field, Field)
assert_type(field.name, str)
