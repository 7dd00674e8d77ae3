"""A django-debug-toolbar panel: what the request's DataLoaders did, batch by batch.

Add it to the toolbar's panels (with ``DataLoaderMiddleware`` after the
toolbar's middleware, as usual: the toolbar's comes first)::

    DEBUG_TOOLBAR_PANELS = [
        *debug_toolbar.settings.PANELS_DEFAULTS,
        "dataloader_sync.django.debug_toolbar.DataLoadersPanel",
    ]

For the request shown, the panel lists each batch-function call in order:
loader name, round (a GraphQL level), keys sent to the batch function,
value-cache hits, duration, and the SQL statements that call ran -- beside
the count of statements run outside any batch, so an N+1 shows as many
statements outside and few batches.  How batches are seen and SQL is
attributed: ``_batch_recorder`` (the registries created during the request
report to it; the application's code is unchanged).

Its stats are plain JSON, so it renders from the toolbar's store too (the
history panel, django-debug-toolbar 6+'s stores).  Needs
``django-debug-toolbar`` (4.4 or later).
"""
from __future__ import annotations

from typing import Any, Optional

try:
    from debug_toolbar.panels import Panel
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.django.debug_toolbar needs django-debug-toolbar: pip install django-debug-toolbar"
    ) from exc

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ._batch_recorder import BatchRecorder

__all__ = ["DataLoadersPanel"]


# A statement wraps inside its cell (data-djdt-styles: the toolbar applies them, also under a CSP).
_SQL_ITEM = '<li><code data-djdt-styles="whiteSpace:normal;wordBreak:break-word">{}</code> <small>({})</small></li>'


def _ms(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.2f} ms"


def render(stats: dict[str, Any]) -> SafeString:
    """The panel's HTML for *stats* (as ``BatchRecorder.stats()`` makes them); every value escaped."""
    batches = stats.get("batches", [])
    summary = format_html(
        "<p>Batch calls: {}; SQL statements in them: {}; outside any batch: {}.</p>",
        sum(1 for b in batches if b["keys"]), stats.get("sql_in_batches", 0), stats.get("sql_outside_batches", 0))
    if not batches:
        return format_html("{}<p>No DataLoader batch in this request.</p>", summary)
    rows = []
    for number, batch in enumerate(batches, 1):
        sql = format_html_join("", _SQL_ITEM,
                               ((s["sql"], _ms(s["duration_ms"])) for s in batch["sql"]))
        outcome = batch["error"] or (f"{batch['key_errors']} key errors" if batch.get("key_errors") else "")
        rows.append((number, batch["loader"], batch["round"], batch["keys"], batch["value_cache_hits"],
                     _ms(batch["duration_ms"]), outcome, sql))
    body = format_html_join(
        "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td><ol class=\"djdt-dataloader-sql\">{}</ol></td></tr>", rows)
    table = format_html(
        "<table><thead><tr><th>#</th><th>Loader</th><th>Round</th><th>Keys</th><th>Value-cache hits</th>"
        "<th>Duration</th><th>Errors</th><th>SQL</th></tr></thead><tbody>{}</tbody></table>", body)
    return format_html("{}{}", summary, table)


class DataLoadersPanel(Panel):
    """The request's DataLoader batches (see the module notes).

    One instance per request (the toolbar makes one); its recorder is that
    request's only.
    """

    title = "DataLoaders"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recorder = BatchRecorder()

    @property
    def nav_subtitle(self) -> str:
        stats = self.get_stats()
        if not stats:
            return ""
        batches = stats.get("batches", [])
        calls = sum(1 for b in batches if b["keys"])
        hits = sum(b["value_cache_hits"] for b in batches)
        return f"{calls} batches, {stats.get('sql_in_batches', 0)} SQL" + (f", {hits} cache hits" if hits else "")

    def enable_instrumentation(self) -> None:
        self._recorder.start()

    def disable_instrumentation(self) -> None:
        self._recorder.stop()

    def generate_stats(self, request: Any, response: Any) -> None:
        self.record_stats(self._recorder.stats())

    @property
    def content(self) -> str:
        return render(self.get_stats())
