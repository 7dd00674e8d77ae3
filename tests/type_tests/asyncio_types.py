"""Awaiting a loader's future: the value's type, as ``result()`` gives it."""
from __future__ import annotations

import asyncio

from typing_extensions import assert_type

from dataloader_sync import DataLoader, Future, gather


class User:
    name: str = "ann"


def load_users(ids: list[int]) -> list[User]:
    return [User() for _ in ids]


users = DataLoader(load_users)


async def resolve() -> str:
    user = await users.load(1)
    assert_type(user, User)
    name = await users.load(2).then(lambda u: u.name)
    assert_type(name, str)
    both = await gather([users.load(3), users.load(4)])
    assert_type(both, list[User])
    return user.name


def in_a_task() -> asyncio.Task[User]:
    fut: Future[User] = users.load(5)
    return asyncio.ensure_future(fut)
