"""A deterministic Pinry data set (``populate(scale, seed)``; scale 1: ~2,700 rows).

Users with their tokens, images with their three thumbnails, pins (some private, each with 0-4 of 16 tags),
boards per user (some private, some empty) holding pins.  ``published`` is set from a fixed base after the
rows are made (the models' ``auto_now_add`` would stamp the clock).
"""
from __future__ import annotations

import datetime
import random

from taggit.models import Tag

from . import models as m

BASE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
NAMES = ("ada", "alan", "grace", "linus", "barbara", "ken", "dennis", "margaret", "tim", "radia", "whit", "frances")
TAGS = ("cats", "dogs", "art", "food", "travel", "design", "retro", "maps", "birds", "space", "type", "bikes",
        "trains", "plants", "film", "music")
SIZES = {"thumbnail": (240, 180), "standard": (600, 450), "square": (125, 125)}


def populate(scale: float = 1.0, seed: int = 41) -> dict[str, int]:
    rng = random.Random(seed)
    users = [m.User.objects.create(username=name, email=f"{name}@example.org") for name in NAMES]
    tags = [Tag.objects.create(name=name, slug=name) for name in TAGS]
    pins = []
    for i in range(max(8, int(320 * scale))):
        width, height = 800 + i % 7 * 10, 600 + i % 5 * 10
        image = m.Image.objects.create(image=f"image/original/by-md5/{i % 16:x}/{i}.jpg", width=width, height=height)
        for size, (w, h) in SIZES.items():
            m.Thumbnail.objects.create(original=image, size=size, width=w, height=h,
                                       image=f"image/thumbnail/by-md5/{i % 16:x}/{i}-{size}.jpg")
        pin = m.Pin.objects.create(
            submitter=rng.choice(users), private=rng.random() < 0.15, image=image,
            url=f"https://pictures.example/{i}.jpg" if i % 4 else None,
            referer=f"https://pictures.example/page/{i}" if i % 3 else None,
            description=f"pin {i}" if i % 5 else "")
        pin.tags.add(*rng.sample(tags, rng.randrange(5)))
        pins.append(pin)
    boards = []
    for user in users:
        for b in range(rng.randrange(1, 5)):
            board = m.Board.objects.create(submitter=user, name=f"{user.username} board {b}",
                                           private=rng.random() < 0.2)
            board.pins.set(rng.sample(pins, rng.randrange(0, min(len(pins), int(24 * scale) + 2))))
            boards.append(board)
    for i, pin in enumerate(pins):
        m.Pin.objects.filter(pk=pin.pk).update(published=BASE + datetime.timedelta(minutes=7 * i))
    for i, board in enumerate(boards):
        m.Board.objects.filter(pk=board.pk).update(published=BASE + datetime.timedelta(hours=5 * i))
    return {"users": len(users), "tags": len(tags), "images": len(pins), "thumbnails": 3 * len(pins),
            "pins": len(pins), "boards": len(boards), "tagged": m.Pin.tags.through.objects.count(),
            "board pins": m.Board.pins.through.objects.count()}
