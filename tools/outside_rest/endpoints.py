"""The requests: what Pinry's single-page app sends (pinry-spa/src/components/api.js), with the data set's
names.  Each is (path, the username it is signed in as or None), or for a write (path, username, method,
JSON data); ``endpoints()`` reads the ids it needs from the database.
"""
from __future__ import annotations

from typing import Any

from . import models as m

PINS = "/api/v2/pins/?format=json&ordering=-id&limit=30&offset=0"   # fetchPins(offset, tag, user, board)


def endpoints() -> dict[str, tuple[Any, ...]]:
    board = m.Board.objects.filter(private=False).exclude(pins=None).order_by("id").first()
    pin = m.Pin.objects.filter(private=False).order_by("-id")[3]
    own = m.Board.objects.filter(submitter__username="ada").order_by("id").first()
    assert board is not None and own is not None
    public = list(m.Pin.objects.filter(private=False).order_by("id").values_list("id", flat=True)[:6])
    return {
        "pins": (PINS, None),
        "pins signed in": (PINS, "ada"),
        "pins by tag": (PINS + "&tags__name=cats", "grace"),
        "pins by user": (PINS + "&submitter__username=alan", "alan"),
        "pins of a board": (PINS + f"&pins__id={board.pk}", None),
        "pin": (f"/api/v2/pins/{pin.pk}/", "ada"),                                      # fetchPin
        "boards of a user": ("/api/v2/boards/?submitter__username=ada&offset=0&limit=50", "ada"),   # fetchBoardForUser
        "boards search": ("/api/v2/boards/?search=board&offset=0&limit=50", None),      # fetchListWhichContains
        "board": (f"/api/v2/boards/{board.pk}/", "linus"),                               # Board.get
        "tags": ("/api/v2/tags-auto-complete/", None),                                   # Tag.fetchList
        # writes: the response is read after the write (BoardSerializer.update, PinSerializer.create)
        "add to a board": (f"/api/v2/boards/{own.pk}/", "ada", "patch", {"pins_to_add": public}),   # addToBoard
        "create a pin": ("/api/v2/pins/", "ada", "post", {"image_by_id": pin.image_id, "description": "again",
                                                          "tags": ["cats", "new"]}),         # createFromUploaded
    }
