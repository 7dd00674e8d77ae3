"""DataLoader: key and value types come from the batch function, no annotations needed."""
from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Iterable, Mapping, Sequence
from typing import Optional, Union

from typing_extensions import assert_type

from dataloader_sync import BatchLoaderEnvironment, DataLoader, Future, completed_future, gather


class User:
    name: str = "ann"
    id: int = 1


# -- the shapes of batch function ------------------------------------------------------------
def load_users(ids: list[int]) -> list[User]:
    return [User() for _ in ids]


def load_users_from_sequence(ids: Sequence[int]) -> Sequence[User]:
    return [User() for _ in ids]


def load_users_from_iterable(ids: Iterable[int]) -> list[User]:
    return [User() for _ in ids]


def load_users_or_errors(ids: list[int]) -> list[Union[User, Exception]]:
    return [User() if i else KeyError(i) for i in ids]


def load_optional_users(ids: list[int]) -> list[Optional[User]]:
    return [None for _ in ids]


def load_users_by_name(names: list[str]) -> dict[str, User]:  # a mapped loader
    return {name: User() for name in names}


def load_users_later(ids: list[int]) -> cf.Future[list[User]]:
    return completed_future([User() for _ in ids])


def load_users_by_name_later(names: list[str]) -> cf.Future[Mapping[str, User]]:
    return completed_future({name: User() for name in names})


def load_with_env(ids: list[int], env: BatchLoaderEnvironment) -> list[str]:
    return [f"{env.context}:{i}" for i in ids]


def load_mapped_with_env(ids: list[int], env: BatchLoaderEnvironment) -> dict[int, str]:
    return {i: str(env.context) for i in ids}


def load_later_with_env(ids: list[int], env: BatchLoaderEnvironment) -> cf.Future[list[str]]:
    return completed_future([str(i) for i in ids])


users = DataLoader(load_users)
assert_type(users, DataLoader[int, User])
assert_type(DataLoader(load_users_from_sequence), DataLoader[int, User])
assert_type(DataLoader(load_users_from_iterable), DataLoader[int, User])
assert_type(DataLoader(load_users_or_errors), DataLoader[int, User])  # an Exception fails its key only
assert_type(DataLoader(load_optional_users), DataLoader[int, Optional[User]])
assert_type(DataLoader(load_users_by_name), DataLoader[str, Optional[User]])  # a missing key gives None
assert_type(DataLoader(load_users_later), DataLoader[int, User])
assert_type(DataLoader(load_users_by_name_later), DataLoader[str, Optional[User]])
assert_type(DataLoader(load_with_env, pass_env=True), DataLoader[int, str])
assert_type(DataLoader(load_mapped_with_env, pass_env=True, context="ctx"), DataLoader[int, Optional[str]])
assert_type(DataLoader(load_later_with_env, pass_env=True), DataLoader[int, str])

# Every option keeps the inferred types.  (With mypy, a lambda among the
# arguments makes two overloads match, and the loader is DataLoader[Any, Any]:
# pass a def, as here, or annotate the variable.)
def user_key(key: int) -> int:
    return key


tuned = DataLoader(load_users, name="users", max_batch_size=100, cache_key_fn=user_key,
                   cache_exceptions=False, batch=True, cache=True, executor=cf.ThreadPoolExecutor())
assert_type(tuned, DataLoader[int, User])

# An untyped batch function (or a lambda) gives DataLoader[Any, Any]; annotate
# the variable to say more.
by_lambda: DataLoader[int, str] = DataLoader(lambda ids: [str(i) for i in ids])

# -- loading ------------------------------------------------------------------------------------
assert_type(users.load(1), Future[User])
assert_type(users.load(1).result(), User)
assert_type(users.load_many([1, 2]), Future[list[User]])
assert_type(users.load_many([1, 2], return_exceptions=True), Future[list[Union[User, BaseException]]])
assert_type(users.dispatch(), Future[list[User]])
assert_type(users.dispatch_and_join(), list[User])
assert_type(users.prime(3, User()), DataLoader[int, User])
assert_type(users.prime(4, KeyError(4)), DataLoader[int, User])
assert_type(users.prime(5, users.load(1)), DataLoader[int, User])
assert_type(users.clear(3).clear_all(), DataLoader[int, User])

users.load("1")  # type: ignore[arg-type]
users.prime(6, "not a user")  # type: ignore[arg-type]

# A Future is a concurrent.futures.Future of the same type.
plain: cf.Future[User] = users.load(1)

# -- then: a value, or a future that is flattened --------------------------------------------
assert_type(users.load(1).then(lambda user: user.name), Future[str])


def best_friend(user: User) -> Future[User]:
    return users.load(2)


def name_later(user: User) -> cf.Future[str]:
    return completed_future(user.name)


assert_type(users.load(1).then(best_friend), Future[User])
# A plain concurrent.futures.Future is flattened too: its value type is kept
# (the future's own type is Future for pyright, cf.Future for mypy).
assert_type(users.load(1).then(name_later).result(), str)
assert_type(users.load(1).then(best_friend).then(lambda user: user.name), Future[str])

# A lambda returning a loader's future (or a chain) is flattened as a named
# function is: mypy types the lambda without context first, and the
# overloads of then() are built so that this does not make the result Any.
assert_type(users.load(1).then(lambda user: users.load(user.id + 1)), Future[User])
assert_type(users.load(1).then(lambda user: users.load(user.id + 1)).result(), User)
assert_type(users.load(1).then(lambda user: users.load(user.id + 1).then(lambda u: u.name)), Future[str])
assert_type(users.load(1).then(lambda user: completed_future(len(user.name))).result(), int)
by_name = DataLoader(load_users_by_name)
assert_type(users.load(1).then(lambda user: by_name.load(user.name)), Future[Optional[User]])
assert_type(users.load(1).then(lambda user: by_name.load(user.name)).then(lambda u: u is None), Future[bool])
assert_type(users.load(1).then(lambda user: None), Future[None])

# -- gather: the futures' common type ----------------------------------------------------------
assert_type(gather([users.load(1), users.load(2)]), Future[list[User]])
assert_type(gather([users.load(1)], return_exceptions=True), Future[list[Union[User, BaseException]]])
mixed = gather([completed_future(1), completed_future("a")])  # List[int | str], or List[Any] (mypy)
