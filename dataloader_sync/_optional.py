"""What to install when an integration's optional dependency is missing.

Every integration imports its packages lazily and, when one is missing,
raises an ``ImportError`` that names the extra bringing it:
``pip install "dataloader_sync[graphene-django]"``.  The extras are
setup.cfg's, one per integration and per docs page.
"""
from __future__ import annotations

__all__ = ["install_hint", "missing_dependency"]

#: The distribution of each importable top-level module an integration needs.
_DISTRIBUTIONS = {
    "django_filters": "django-filter",
    "graphene_django": "graphene-django",
    "graphql": "graphql-core",
    "graphql_relay": "graphql-relay",
    "rest_framework": "djangorestframework",
    "strawberry_django": "strawberry-graphql-django",
}


def install_hint(extra: str) -> str:
    """``pip install "dataloader_sync[extra]"``, as the messages and the docs write it."""
    return f'pip install "dataloader_sync[{extra}]"'


def missing_dependency(what: str, exc: ImportError, extra: str) -> ImportError:
    """The error for *what* when importing one of its dependencies raised *exc*.

    Args:
        what: the module or name the user asked for
            (``"dataloader_sync.django.GraphQLView"``).
        exc: the ``ImportError`` raised by the import.
        extra: the extra that installs the missing package.

    Returns:
        an ``ImportError`` (raise it ``from exc``) naming the missing
        package and the ``pip install`` command.
    """
    module = (exc.name or "").partition(".")[0]
    package = _DISTRIBUTIONS.get(module, module) or "its optional dependencies"
    return ImportError(f"{what} needs {package}: {install_hint(extra)}", name=exc.name)
