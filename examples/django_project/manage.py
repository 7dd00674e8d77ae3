#!/usr/bin/env python
"""Django's command-line utility for the example project.

    python examples/django_project/manage.py migrate
    python examples/django_project/manage.py runserver
    # then POST {"query": "{ authors { name books { title reviews { rating } } } }"}
    # to http://127.0.0.1:8000/graphql (or open it in a browser for GraphiQL)
"""
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "library_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
