"""pinry/urls.py's API routes and users/urls.py (namespace ``users``), over a variant's views.

``urlconf_for(views)`` is a URL module for one variant: the routes and names are upstream's, the views the
variant's, so that the hyperlinks the serializers reverse are the same under every variant.
"""
from __future__ import annotations

import types

from django.urls import include, path

from .views import VIEWSETS, routers_for


def urlconf_for(views: dict[str, type], name: str) -> types.ModuleType:
    drf_router, users_router = routers_for(views)
    users = types.ModuleType(f"{__name__}.users_{name}")
    users.app_name = "users"   # type: ignore[attr-defined]
    users.urlpatterns = [path('', include(users_router.urls))]   # type: ignore[attr-defined]
    module = types.ModuleType(f"{__name__}.{name}")
    module.urlpatterns = [   # type: ignore[attr-defined]
        # drf api
        path('api/v2/', include(drf_router.urls)),
        path('api/v2/profile/', include(users)),
    ]
    return module


urlpatterns = urlconf_for(VIEWSETS, "upstream").urlpatterns   # type: ignore[attr-defined]
