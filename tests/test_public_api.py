"""The public face of dataloader_sync: __all__, and a core free of integrations."""
from __future__ import annotations

import json
import subprocess
import sys

import dataloader_sync


def test_public_api_all_is_sorted():
    assert dataloader_sync.__all__ == sorted(dataloader_sync.__all__)


def test_public_api_all_has_no_duplicates():
    assert len(set(dataloader_sync.__all__)) == len(dataloader_sync.__all__)


def test_public_api_every_name_in_all_exists():
    missing = [name for name in dataloader_sync.__all__ if not hasattr(dataloader_sync, name)]
    assert missing == []


def test_public_api_star_import_gives_exactly_all():
    namespace: dict = {}
    exec("from dataloader_sync import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(dataloader_sync.__all__)


def test_public_api_has_the_design_names():
    expected = {
        "DataLoader", "DataLoaderRegistry", "ScheduledDataLoaderRegistry", "ScheduledExecutor",
        "Statistics", "DispatchPredicate", "DISPATCH_ALWAYS", "DISPATCH_NEVER",
        "dispatch_if_depth_greater_than", "dispatch_if_longer_than", "Future",
        "BatchLoaderEnvironment", "DispatchResult", "get_default_scheduled_executor",
    }
    assert expected <= set(dataloader_sync.__all__)


def test_public_api_import_does_not_import_graphql_flask_django_or_opentelemetry():
    code = (
        "import json, sys\n"
        "import dataloader_sync\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "               ('graphql', 'graphene', 'flask', 'django', 'opentelemetry', 'redis'))\n"
        "print(json.dumps(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []
