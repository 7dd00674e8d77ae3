"""A view whose ORM batches run off the request thread: on the ticks of a scheduled registry.

``GET /authors-books/?db=ALIAS`` loads every author's books through
``related_loader`` on a ``ScheduledDataLoaderRegistry`` in ticker mode whose
ticks run on ``settings.ORM_TEST_SCHEDULED_EXECUTOR``, waits for them without
dispatching on the request thread, and answers JSON: ``books`` (titles per
author) and ``threads`` (the thread that completed each load).
"""
from __future__ import annotations

import threading

from django.conf import settings
from django.http import JsonResponse

from dataloader_sync import ScheduledDataLoaderRegistry
from dataloader_sync.django import related_loader

from .models import Author

TIMEOUT = 10.0


def authors_books(request):
    alias = request.GET["db"]
    authors = list(Author.objects.using(alias).order_by("pk"))
    with ScheduledDataLoaderRegistry(scheduled_executor=settings.ORM_TEST_SCHEDULED_EXECUTOR, ticker_mode=True,
                                     schedule=0.001) as registry:
        registry.dispatch_all()  # starts the ticker: from now on ticks dispatch, on the executor's threads
        futures = [related_loader(registry, Author.books).load(a).then(
            lambda books: ([b.title for b in books], threading.current_thread().name)) for a in authors]
        done = threading.Semaphore(0)
        for f in futures:
            f.add_done_callback(lambda _: done.release())
        for _ in futures:  # result() would dispatch on this thread: wait for the ticks instead
            if not done.acquire(timeout=TIMEOUT):
                return JsonResponse({"error": "a load was not dispatched"}, status=500)
        results = [f.result(0) for f in futures]
    return JsonResponse({"books": [r[0] for r in results], "threads": [r[1] for r in results]})
