"""A missing optional dependency names the extra that brings it (``_optional``).

Each case imports an integration in a fresh interpreter where the dependency
is made unimportable (``sys.modules[name] = None``) and checks the message.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dataloader_sync._optional import install_hint

CASES = [
    # (modules made missing, the code a user writes, the message)
    (["graphql"], "import dataloader_sync.graphql",
     'dataloader_sync.graphql needs graphql-core: pip install "dataloader_sync[graphql]"'),
    (["flask"], "import dataloader_sync.flask",
     'dataloader_sync.flask needs Flask: pip install "dataloader_sync[flask]"'),
    (["graphql"], "from dataloader_sync.flask import graphql_view; graphql_view(None)",
     'dataloader_sync.flask.graphql_view needs graphql-core: pip install "dataloader_sync[graphql]"'),
    (["django"], "import dataloader_sync.django",
     'dataloader_sync.django needs Django: pip install "dataloader_sync[django]"'),
    (["graphene_django"], "from dataloader_sync.django import GraphQLView",
     'dataloader_sync.django.GraphQLView needs graphene-django: pip install "dataloader_sync[graphene-django]"'),
    (["graphene_django"], "from dataloader_sync.django import DjangoConnectionField",
     ('dataloader_sync.django.DjangoConnectionField needs graphene-django: '
     'pip install "dataloader_sync[graphene-django]"')),
    (["graphene_django"], "from dataloader_sync.django import DjangoFilterConnectionField",
     ('dataloader_sync.django.DjangoFilterConnectionField needs graphene-django: '
     'pip install "dataloader_sync[graphene-django]"')),
    (["django_filters"], "from dataloader_sync.django import DjangoFilterConnectionField",
     ('dataloader_sync.django.DjangoFilterConnectionField needs django-filter: '
     'pip install "dataloader_sync[graphene-django]"')),
    (["graphql"], "from dataloader_sync.django import DjangoDebugExecutionContext",
     ('dataloader_sync.django.DjangoDebugExecutionContext needs graphql-core: '
     'pip install "dataloader_sync[graphene-django]"')),
    (["redis"], "import dataloader_sync.redis",
     'dataloader_sync.redis needs redis-py: pip install "dataloader_sync[redis]"'),
    (["sqlalchemy"], "import dataloader_sync.sqlalchemy",
     'dataloader_sync.sqlalchemy needs SQLAlchemy 2.0: pip install "dataloader_sync[sqlalchemy]"'),
    (["opentelemetry"], "import dataloader_sync.otel",
     'dataloader_sync.otel needs opentelemetry-api: pip install "dataloader_sync[otel]"'),
    (["ariadne"], "import dataloader_sync.ariadne",
     'dataloader_sync.ariadne needs Ariadne: pip install "dataloader_sync[ariadne]"'),
    (["strawberry_django"], "import dataloader_sync.strawberry_django",
     'dataloader_sync.strawberry_django needs strawberry-django: pip install "dataloader_sync[strawberry-django]"'),
]

PROLOGUE = """
import sys
for name in {missing!r}:
    sys.modules[name] = None
import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_settings")
try:
    {code}
except ImportError as exc:
    print(exc)
else:
    print("no ImportError")
"""


@pytest.mark.parametrize("missing, code, message", CASES, ids=[case[1] for case in CASES])
def test_a_missing_optional_dependency_names_its_extra(missing: list[str], code: str, message: str) -> None:
    source = PROLOGUE.format(missing=missing, code=code)
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(__file__), check=True)
    assert out.stdout.strip() == message, out.stderr


def test_install_hint_quotes_the_requirement_for_every_shell() -> None:
    assert install_hint("graphene-django") == 'pip install "dataloader_sync[graphene-django]"'
