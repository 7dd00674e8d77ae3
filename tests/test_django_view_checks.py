"""graphene-django's own GraphQLView under DATALOADER_SYNC_AUTO_RELATIONS = True: the setting has no effect there,
and that is said, by DataLoaderMiddleware at the view's first response (a RuntimeWarning) and by the system check
dataloader_sync.W001 of the dataloader_sync.django app (manage.py check). Real graphene-django views in a URLconf,
Django's test client and check framework; the getting-started app built from its page with the wrong view."""
from __future__ import annotations

import importlib.util
import io
import os
import pathlib
import re
import subprocess
import sys
import warnings

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")

HINT = ("Use dataloader_sync.django.GraphQLView (or put dataloader_sync.django.DataLoaderGraphQLViewMixin first in "
        "the view's bases), or give the view "
        "execution_context_class=dataloader_sync.graphql.AutoRelationsExecutionContext.")
PROBLEM = ("DATALOADER_SYNC_AUTO_RELATIONS = True has no effect on the view at 'graphql': "
           "graphene_django.views.GraphQLView executes without dataloader_sync, so every relation costs one "
           "statement per row.")
MESSAGE = f"{PROBLEM} {HINT}"
QUERY = "{ authors { name books { title } } }"


@pytest.fixture(scope="module")
def schema():
    import graphene
    from books import models
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry

    types = Registry()  # apart from the example project's types of these models

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title",)
            name = "CheckedBook"
            registry = types

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name", "books")
            name = "CheckedAuthor"
            registry = types

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author), required=True)

        def resolve_authors(root, info):
            return models.Author.objects.order_by("pk")

    return graphene.Schema(query=Query)


def urlconf(*patterns):
    return type("urls", (), {"urlpatterns": list(patterns)})


def graphene_view(schema, **initkwargs):
    from django.views.decorators.csrf import csrf_exempt
    from graphene_django.views import GraphQLView

    return csrf_exempt(GraphQLView.as_view(schema=schema, **initkwargs))  # as the getting-started urls.py


def post(client, path="/graphql"):
    """POST the query; the response's JSON and the number of statements it cost."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = client.post(path, {"query": QUERY}, content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json(), len(queries)


def runtime_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, RuntimeWarning)]


def test_graphene_django_s_own_view_warns_once_at_its_first_response(schema, example_books):
    from django.test import Client, override_settings
    from django.urls import path

    from dataloader_sync.django import GraphQLView

    example_books(authors=5, books=2, reviews=0)
    urls = urlconf(path("graphql", graphene_view(schema)), path("ours", GraphQLView.as_view(schema=schema)))
    with override_settings(ROOT_URLCONF=urls, DATALOADER_SYNC_AUTO_RELATIONS=True):
        client = Client()
        with pytest.warns(RuntimeWarning) as record:
            theirs, statements = post(client)
        assert runtime_warnings(record) == [MESSAGE]
        with warnings.catch_warnings(record=True) as later:
            warnings.simplefilter("always")
            assert post(client) == (theirs, statements)  # the same view again: said once
            ours, our_statements = post(client, "/ours")  # the view the message names: nothing to say
        assert runtime_warnings(later) == []
    assert theirs == ours and len(theirs["data"]["authors"]) == 5
    assert (statements, our_statements) == (1 + 5, 2)  # what the warning is about


def test_a_subclass_is_named_with_its_route(schema, example_books):
    from django.test import Client, override_settings
    from django.urls import include, path
    from django.views.decorators.csrf import csrf_exempt
    from graphene_django.views import GraphQLView

    class MyView(GraphQLView):
        pass

    example_books(authors=2, books=1, reviews=0)
    urls = urlconf(path("api/", include([path("graphql", csrf_exempt(MyView.as_view(schema=schema)))])))
    with override_settings(ROOT_URLCONF=urls, DATALOADER_SYNC_AUTO_RELATIONS=True), \
            pytest.warns(RuntimeWarning) as record:
        post(Client(), "/api/graphql")
    name = f"{__name__}.{MyView.__qualname__}"
    assert runtime_warnings(record) == [(
        f"DATALOADER_SYNC_AUTO_RELATIONS = True has no effect on the view at 'api/graphql': {name} (a "
        f"graphene_django.views.GraphQLView without DataLoaderGraphQLViewMixin) executes without dataloader_sync, "
        f"so every relation costs one statement per row. {HINT}")]


def quiet_views(schema):
    from dataloader_sync.django import GraphQLView
    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    return {
        "dataloader_sync.django.GraphQLView": (GraphQLView.as_view(schema=schema), True),
        "graphene-django's, told the switch": (
            graphene_view(schema, execution_context_class=AutoRelationsExecutionContext), True),
        "graphene-django's, told another class": (
            graphene_view(schema, execution_context_class=DataLoaderExecutionContext), True),
        "graphene-django's, the setting off": (graphene_view(schema), False),
    }


@pytest.mark.parametrize("case", ["dataloader_sync.django.GraphQLView", "graphene-django's, told the switch",
                                  "graphene-django's, told another class", "graphene-django's, the setting off"])
def test_a_view_that_honours_the_setting_or_was_told_a_class_is_not_named(schema, example_books, case):
    from django.core import checks
    from django.test import Client, override_settings
    from django.urls import path

    from dataloader_sync.django._view_checks import check_views

    example_books(authors=2, books=1, reviews=0)
    view, setting = quiet_views(schema)[case]
    with override_settings(ROOT_URLCONF=urlconf(path("graphql", view)), DATALOADER_SYNC_AUTO_RELATIONS=setting):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            body, _ = post(Client())
        assert [m for m in check_views() if isinstance(m, checks.CheckMessage)] == []
    assert runtime_warnings(record) == [] and "errors" not in body


def test_where_warnings_are_errors_the_request_fails_and_its_registry_is_closed(schema, example_books):
    from django.test import Client, override_settings
    from django.urls import path

    made: list[DataLoaderRegistry] = []

    def make_registry():
        made.append(DataLoaderRegistry())
        return made[-1]

    example_books(authors=2, books=1, reviews=0)
    with override_settings(ROOT_URLCONF=urlconf(path("graphql", graphene_view(schema))),
                           DATALOADER_SYNC_AUTO_RELATIONS=True, DATALOADER_SYNC_REGISTRY_FACTORY=make_registry):
        client = Client()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # as this suite runs (setup.cfg), and users' -W error
            with pytest.raises(RuntimeWarning, match=re.escape(MESSAGE)):
                client.post("/graphql", {"query": QUERY}, content_type="application/json")
            assert [r.closed for r in made] == [True]
            post(client)  # said once: the next request answers
    assert [r.closed for r in made] == [True, True]


@pytest.fixture
def app_installed():
    """The dataloader_sync.django app in INSTALLED_APPS (its ready() registers the check); unregistered after."""
    from django.conf import settings
    from django.core import checks
    from django.test import override_settings

    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "dataloader_sync.django"]):
        from django.apps import apps

        assert apps.get_app_config("dataloader_sync").name == "dataloader_sync.django"
        yield
    from dataloader_sync.django._view_checks import check_views

    checks.registry.registry.registered_checks.discard(check_views)


def test_the_app_s_system_check_names_every_url_of_such_a_view(schema, app_installed):
    from django.core import checks
    from django.core.management import call_command
    from django.test import override_settings
    from django.urls import include, path

    from dataloader_sync.django import GraphQLView

    urls = urlconf(path("graphql", graphene_view(schema)), path("ours", GraphQLView.as_view(schema=schema)),
                   path("v2/", include([path("graphql", graphene_view(schema))])))
    with override_settings(ROOT_URLCONF=urls, DATALOADER_SYNC_AUTO_RELATIONS=True):
        found = [m for m in checks.run_checks(tags=[checks.Tags.urls]) if m.id == "dataloader_sync.W001"]
        out, err = io.StringIO(), io.StringIO()
        call_command("check", stdout=out, stderr=err)
    from graphene_django.views import GraphQLView as Theirs

    assert [(m.level, m.msg, m.hint, m.obj) for m in found] == [
        (checks.WARNING, PROBLEM, HINT, Theirs),
        (checks.WARNING, PROBLEM.replace("'graphql'", "'v2/graphql'"), HINT, Theirs)]
    assert f"(dataloader_sync.W001) {PROBLEM}\n\tHINT: {HINT}" in err.getvalue()
    with override_settings(ROOT_URLCONF=urls):
        assert [m for m in checks.run_checks(tags=[checks.Tags.urls]) if m.id == "dataloader_sync.W001"] == []


@pytest.mark.timeout(300)
def test_the_getting_started_app_with_graphene_django_s_own_view_says_so(tmp_path: pathlib.Path) -> None:
    """The page's Django app, built as test_docs_getting_started does, with urls.py importing graphene-django's
    view: its try_it.py prints the warning (and the statements the page says the setting saves); manage.py check
    names the view once the app is installed."""
    from test_docs_getting_started import PAGE, commands, sections, write_files
    from test_docs_snippets import ROOT, python_blocks

    text = sections(PAGE.read_text(encoding="utf-8"))["Django and graphene-django"]
    ours = "from dataloader_sync.django import GraphQLView"
    files = [(b.caption, b.code.replace(ours, "from graphene_django.views import GraphQLView")) for b in
             python_blocks(text) if b.caption]
    assert sum(ours in b.code for b in python_blocks(text)) == 1
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=240, check=False)
        assert out.returncode == 0, (argv, out.stdout[-2000:], out.stderr[-4000:])
        return out

    made = [c.argv for c in commands(text) if c.argv[0] == "django-admin" or "startapp" in c.argv]
    for argv in made:
        if argv[0] == "django-admin":
            run("-m", "django", *argv[1:])
        else:
            run(*argv[1:])
    write_files(tmp_path, files)
    run("manage.py", "makemigrations", "books")
    run("manage.py", "migrate")
    tried = run("try_it.py")
    assert f"RuntimeWarning: {MESSAGE}" in tried.stderr
    assert "4 statements" in tried.stdout  # the authors, then each of the 3 authors' books: what it warns of
    assert "dataloader_sync.W001" not in run("manage.py", "check").stderr  # the page installs no app
    with (tmp_path / "mysite" / "settings.py").open("a", encoding="utf-8") as settings:
        settings.write('\nINSTALLED_APPS += ["dataloader_sync.django"]\n')
    assert f"(dataloader_sync.W001) {PROBLEM}\n\tHINT: {HINT}" in run("manage.py", "check").stderr
