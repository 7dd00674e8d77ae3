"""A port of Pinry's REST API (Django REST framework), for ``tools/outside_check_rest.py``.

Upstream: https://github.com/pinry/pinry at commit 08f97b5208f53fa650372218d21e7736651d69b1 (2025-03-12),
BSD 2-Clause licence (``LICENSE.md`` there: "Copyright (c) 2019, Pinry's Contributors"), a self-hosted image
board.  A Django app of its own (label ``outside_rest``), configured in-process by the tool on SQLite in memory.

- ``models.py``: the models the API reads, with their relations and the properties the serializers read
  (bodies as upstream): core/models.py (``Image``, ``Board``, ``Pin``), django_images/models.py (``Image``,
  here ``BaseImage``, the name core/models.py imports it by; ``Thumbnail``), users/models.py (``User``, a
  proxy of ``auth.User``, and ``create_token_if_necessary``).  Tags are django-taggit's, as upstream.
- ``serializers.py``: core/serializers.py and users/serializers.py (``UserSerializer``), as written, writes
  included.
- ``views.py``: core/views.py, core/permissions.py and users/views.py's ``UserViewSet``, as written, with the
  routers of core/views.py and users/views.py; ``urls.py``: pinry/urls.py and users/urls.py (the API's routes).
- ``fixtures.py``: a deterministic data set (no upstream counterpart).
- ``endpoints.py``: the requests the single-page app (pinry-spa/src/components/api.js) sends.

Deviations, each marked where it is made: ``Board.Meta.index_together`` is left out (Django 5.1 removed it; no
read depends on it); the views' ``filter_fields`` read ``filterset_fields`` (django-filter 2.4.0, which upstream
pins, read the old name; later releases read only the new one); the router's second ``basename="board"``
(``boards-auto-complete``) reads ``board-auto-complete`` (REST framework 3.15 and later refuse a basename
registered twice); upload paths and the thumbnail generation (``create_for_url``, ``get_or_create_at_sizes``)
are left out: the fixtures write rows whose image names are set, no file is read or written (so a pin is
created from an image's id, not from a URL); ``PinSerializer``'s ``tags.set(*tags)`` and ``tags.set()`` read
``set(tags)`` and ``set([])`` (django-taggit 2.0 changed the signature; upstream pins 1.3.0).

Left out: image uploads, the plugin system, the login views and the server-rendered pages.
"""
