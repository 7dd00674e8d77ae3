"""The face of dataloader_sync.sqlalchemy: what it imports, what it exports, what it says when SQLAlchemy is missing."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("sqlalchemy")

import dataloader_sync.sqlalchemy as integration


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_sqlalchemy_package_all_is_sorted_and_complete():
    assert integration.__all__ == sorted(integration.__all__)
    assert set(integration.__all__) == {"load_model", "load_related", "model_loader", "related_loader"}
    assert all(hasattr(integration, name) for name in integration.__all__)


def test_sqlalchemy_package_imports_sqlalchemy_and_no_other_integration():
    heavy = json.loads(_run(
        "import json, sys\n"
        "import dataloader_sync\n"
        "core = sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy')\n"
        "import dataloader_sync.sqlalchemy\n"
        "others = sorted({m.split('.')[0] for m in sys.modules} & {'graphql', 'graphene', 'flask', 'django',\n"
        "                 'flask_sqlalchemy', 'opentelemetry', 'redis', 'psycopg'})\n"
        "print(json.dumps([core, others, 'sqlalchemy' in sys.modules]))\n"
    ))
    assert heavy == [[], [], True]


def test_sqlalchemy_package_without_sqlalchemy_says_what_to_install():
    out = _run(
        "import sys\n"
        "sys.modules['sqlalchemy'] = None  # as if not installed\n"
        "try:\n"
        "    import dataloader_sync.sqlalchemy\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    assert 'pip install "dataloader_sync[sqlalchemy]"' in out
