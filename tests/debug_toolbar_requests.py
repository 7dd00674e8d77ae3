"""Requests through the example project with django-debug-toolbar, in a process of their own.

Run by tests/test_django_debug_toolbar.py (Django's settings are configured
once per process, and the toolbar's must not leak into other test modules).
Prints one JSON object: for each scenario, what the toolbar stored and
rendered for the DataLoaders panel.

    python tests/debug_toolbar_requests.py
"""
from __future__ import annotations

import json
import os
import pathlib
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "django_project"
sys.path.insert(0, str(EXAMPLE))
os.environ["DJANGO_SETTINGS_MODULE"] = "library_site.settings_debug_toolbar"

PANEL = "DataLoadersPanel"
QUERY = "{ authors { name books { title reviews { rating } } } }"


def main() -> None:
    import django
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = ":memory:"
    settings.ALLOWED_HOSTS = ["testserver"]
    # Panels fetched from the store (render_panel), as under runserver; the test client says it is
    # multi-process, for which toolbars before 6 would render them inline and store nothing.
    settings.DEBUG_TOOLBAR_CONFIG = {"RENDER_PANELS": False}
    django.setup()
    from debug_toolbar.toolbar import DebugToolbar
    from django.core.cache import cache
    from django.core.management import call_command
    from django.test import Client, override_settings

    call_command("migrate", verbosity=0)
    client = Client()

    def stored_ids() -> set:
        """The ids of the requests the toolbar keeps (its store from 6 on, an in-memory dict before)."""
        try:
            from debug_toolbar.store import get_store
        except ImportError:
            return set(DebugToolbar._store)
        return set(get_store().request_ids())

    def panel(request_id: str) -> dict:
        # the toolbar's own view (its parameter is request_id from 6 on, store_id before)
        rendered = client.get("/__debug__/render_panel/",
                              {"request_id": request_id, "store_id": request_id, "panel_id": PANEL})
        toolbar = DebugToolbar.fetch(request_id)  # from the store, as the toolbar's own views do
        stored = toolbar.get_panel_by_id(PANEL)
        return {"status": rendered.status_code, "content": rendered.json()["content"],
                "stats": stored.get_stats(), "nav_subtitle": stored.nav_subtitle}

    def request(method: str, path: str, **kwargs) -> tuple:
        before = stored_ids()
        response = getattr(client, method)(path, **kwargs)
        [request_id] = stored_ids() - before  # the toolbar's id of this request
        return response, request_id

    def page() -> dict:
        response, request_id = request("get", "/authors")
        html = response.content.decode()
        return {"page_status": response.status_code, "has_toolbar": 'id="djDebug"' in html, **panel(request_id)}

    out = {"page": page()}
    with override_settings(BOOKS_VALUE_CACHE="default"):
        cache.clear()
        page()  # fills the shared cache
        out["cached_page"] = page()
        cache.clear()
    # A JSON response has no toolbar: the request is in the store all the same (the history panel's).
    response, request_id = request("post", "/graphql", data={"query": QUERY}, content_type="application/json")
    out["graphql"] = {"status": response.status_code, **panel(request_id)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
