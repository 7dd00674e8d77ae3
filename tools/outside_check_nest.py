"""Outside check: OWASP Nest's strawberry-django schema, ported, under four switches; SQL statements per query.

    /work/venv-sd/bin/python tools/outside_check_nest.py [--quick] [--scale S] [--seed N] [--ties]
                                                         [--query NAME [--sql]] [--diff] [--json PATH]

The schema, models and queries are OWASP Nest's (``tools/outside_nest/``: upstream repository, commit and files
in its docstring): resolvers that return related querysets (``root.issues.order_by("-created_at")[:5]``),
count in place (``self.issues.count()``), read relations in model properties (``release.url`` reads
``repository.owner``), and field hints (``prefetch_related=[Prefetch(..., to_attr=...)]``) that only the
optimizer reads.  Django is configured in-process on SQLite in memory, filled by ``outside_nest.fixtures``
(``--scale``: 1 is ~1,700 rows; ``--quick`` is 0.25, ~190; ``--seed``; ``--ties``: timestamps repeat, so
orders among equal values are the database's, which SQL leaves undefined).

Each query runs once per variant, on a schema of its own, with a fresh context object (no registry: the
switch makes one per execution):

- ``off``: no extension (strawberry-django as it is, no optimizer);
- ``switch``: ``dataloader_sync.strawberry_django.AutoRelationsExtension``;
- ``optimizer``: strawberry-django's ``DjangoOptimizerExtension`` (what Nest runs in production);
- ``both``: the optimizer and the switch.

The table: the statements each variant sends (Django's ``CaptureQueriesContext``; the content-type cache is
warmed first), and whether the four answers (``data`` and error messages, as JSON) are byte-identical.
``ERR`` marks a variant whose execution raised or answered errors; ``--diff`` prints where an answer differs
from ``off``'s, ``--sql`` (with ``--query``) every statement.

A difference the app itself makes is not hidden: a resolver that reads what only the optimizer prefetches
(``UserNode.badges`` reads ``user_badges_list``, ``IssueNode.is_merged`` reads ``merged_pull_requests``, both
``Prefetch(to_attr=...)`` field hints) answers without the optimizer as if the relation were empty — upstream
always runs it.  Such a row reads ``yes*``: off's and the optimizer's answers differ, ``both`` answers as the
optimizer, and the switch as either (as off when it leaves the hint alone, as the optimizer when it honours it,
DESIGN.md §10).  Any other split is ``NO``: a wrong answer.  Exit status 1 if a row is ``NO`` or a variant errs.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import textwrap
import time
from typing import Any, Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("off", "switch", "optimizer", "both")


LEGEND = ("yes: the four answers are byte-identical.  yes*: off's answer and the optimizer's differ (a resolver "
          "reads what only the optimizer prefetches, Prefetch(to_attr=...)); the switch answers as one of them, "
          "both as the optimizer.  NO: any other split (a wrong answer).  ERR: the variant raised or answered errors.")


def setup_django() -> None:
    """Django with ``outside_nest`` (found in tools/) on SQLite in memory, its tables created."""
    import django
    from django.conf import settings

    sys.path.insert(0, os.path.join(ROOT, "tools"))
    sys.path.insert(0, ROOT)
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "outside_nest"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", run_syncdb=True, verbosity=0)


def variant_extensions() -> dict[str, list[Any]]:
    from strawberry_django.optimizer import DjangoOptimizerExtension

    from dataloader_sync.strawberry_django import AutoRelationsExtension

    return {"off": [], "switch": [AutoRelationsExtension], "optimizer": [DjangoOptimizerExtension],
            "both": [DjangoOptimizerExtension, AutoRelationsExtension]}


def with_typename(document: str) -> str:
    """*document* with ``__typename`` in every selection set, as Apollo Client's ``addTypename`` sends it."""
    from graphql import FieldNode, NameNode, OperationDefinitionNode, SelectionSetNode, Visitor, parse, print_ast, visit

    class AddTypename(Visitor):
        def leave_selection_set(self, node: Any, key: Any, parent: Any, *_: Any) -> Any:
            if isinstance(parent, OperationDefinitionNode):
                return None
            names = {s.name.value for s in node.selections if isinstance(s, FieldNode)}
            if "__typename" in names:
                return None
            typename = FieldNode(name=NameNode(value="__typename"), arguments=(), directives=())
            return SelectionSetNode(selections=(*node.selections, typename))

    return print_ast(visit(parse(document), AddTypename()))


class Context:
    """A request's context as a view gives it: an object of its own, with no registry."""


def execute(schema: Any, document: str, variables: dict[str, Any]) -> tuple[int, str, Optional[str], list[str]]:
    """(statements, answer as JSON, error summary or None, the statements' SQL) of one execution."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    error: Optional[str] = None
    with CaptureQueriesContext(connection) as queries:
        try:
            result = schema.execute_sync(document, variable_values=variables, context_value=Context())
            answer = {"data": result.data, "errors": [e.message for e in result.errors or ()]}
            if result.errors:
                error = f"{len(result.errors)} error(s): {result.errors[0].message} at {result.errors[0].path}"
        except Exception as exc:  # a crash is a finding: recorded, not raised
            answer = {"crash": f"{type(exc).__name__}: {exc}"}
            error = answer["crash"]
    sql = [q["sql"] for q in queries.captured_queries]
    return len(sql), json.dumps(answer, default=str), error, sql


def check(queries: dict[str, tuple[str, dict[str, Any]]], only: Optional[str]) -> list[dict[str, Any]]:
    """One row per query: each variant's statements, answer and error."""
    from outside_nest.schema import schema_for

    schemas = {name: schema_for(extensions) for name, extensions in variant_extensions().items()}
    rows = []
    for name, (document, variables) in queries.items():
        if only and only != name:
            continue
        document = with_typename(document)
        row: dict[str, Any] = {"query": name}
        for variant in VARIANTS:
            measured = execute(schemas[variant], document, variables)
            row[variant] = dict(zip(("statements", "answer", "error", "sql"), measured))
        rows.append(row)
    return rows


def verdict(row: dict[str, Any]) -> str:
    """"yes" (four answers byte-identical); "yes*" (see the module notes: the answers are off's and the
    optimizer's, the switch answers as one of them and both as the optimizer); else "NO" and who answers alike."""
    answers = {v: row[v]["answer"] for v in VARIANTS}
    groups: dict[str, list[str]] = {}
    for variant, answer in answers.items():
        groups.setdefault(answer, []).append(variant)
    split = " | ".join("=".join(group) for group in groups.values())
    if len(groups) == 1:
        return "yes"
    if answers["both"] == answers["optimizer"] and answers["switch"] in (answers["off"], answers["optimizer"]):
        return f"yes* ({split})"
    return f"NO ({split})"


def passed(row: dict[str, Any]) -> bool:
    """The row's answers are as they should be and no variant erred."""
    return verdict(row).startswith("yes") and not any(row[v]["error"] for v in VARIANTS)


def table(rows: list[dict[str, Any]]) -> str:
    head = ["query", *VARIANTS, "answers identical"]
    body = [[row["query"], *(("ERR " if row[v]["error"] else "") + str(row[v]["statements"]) for v in VARIANTS),
             verdict(row)] for row in rows]
    totals = [sum(row[v]["statements"] for row in rows) for v in VARIANTS]
    identical, passing = sum(verdict(r) == "yes" for r in rows), sum(map(passed, rows))
    body.append(["total", *map(str, totals), f"{identical}/{len(rows)} identical, {passing}/{len(rows)} pass"])
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]

    def fmt(line: list[str]) -> str:
        return " | ".join(cell.ljust(w) if i in (0, len(line) - 1) else cell.rjust(w)
                          for i, (cell, w) in enumerate(zip(line, widths))).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([fmt(head), rule, *map(fmt, body[:-1]), rule, fmt(body[-1])])


def diffs(rows: list[dict[str, Any]], out: Callable[[str], None]) -> None:
    """Where each variant's answer differs from off's (pretty JSON, unified diff)."""
    for row in rows:
        base = json.dumps(json.loads(row["off"]["answer"]), indent=1).splitlines()
        for variant in VARIANTS[1:]:
            if row[variant]["answer"] != row["off"]["answer"]:
                other = json.dumps(json.loads(row[variant]["answer"]), indent=1).splitlines()
                out(f"--- {row['query']}: off vs {variant}")
                out("\n".join(list(difflib.unified_diff(base, other, "off", variant, n=2, lineterm=""))[:80]))
        for variant in VARIANTS:
            if row[variant]["error"]:
                out(f"!!! {row['query']} [{variant}]: {row[variant]['error']}")


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a small data set (scale 0.25)")
    p.add_argument("--scale", type=float, default=1.0, help="data set size (1: ~1,700 rows)")
    p.add_argument("--seed", type=int, default=40, help="the data set's random seed")
    p.add_argument("--ties", action="store_true",
                   help="timestamps repeat (SQL leaves the order among ties undefined: answers may differ)")
    p.add_argument("--query", help="run only this query (a name in the table)")
    p.add_argument("--diff", action="store_true", help="print where answers differ from off's")
    p.add_argument("--sql", action="store_true", help="print each variant's statements (with --query)")
    p.add_argument("--json", metavar="PATH", help="also write the rows (counts, answers, errors) as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.scale = 0.25
    if args.scale <= 0:
        p.error("--scale must be positive")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    setup_django()
    from django.contrib.contenttypes.models import ContentType
    from outside_nest import fixtures, models
    from outside_nest.queries import QUERIES

    if args.query and args.query not in QUERIES:
        print(f"--query: unknown query {args.query!r}; the queries: {', '.join(QUERIES)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    counts = fixtures.populate(args.scale, args.seed, args.ties)
    ContentType.objects.get_for_models(*[m for m in vars(models).values() if isinstance(m, type)
                                         and issubclass(m, models.models.Model) and not m._meta.abstract])
    rows = check(QUERIES, args.query)
    print(f"OWASP Nest (ported), {sum(counts.values())} rows (scale {args.scale:g}, seed {args.seed});"
          " SQL statements per query:\n")
    print(table(rows))
    costlier = [r["query"] for r in rows if r["both"]["statements"] > r["switch"]["statements"]]
    if costlier:
        print(f"\nboth costs more than the switch alone (DESIGN.md §10 says never): {', '.join(costlier)}")
    if args.diff:
        print()
        diffs(rows, print)
    if args.sql:
        for row in rows:
            for variant in VARIANTS:
                print(f"\n=== {row['query']} [{variant}]: {row[variant]['statements']} statements")
                print("\n".join(row[variant]["sql"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"scale": args.scale, "rows": rows}, out, indent=1)
    failed = not all(map(passed, rows))
    print("\n" + textwrap.fill(LEGEND, 116) + f"\n{'FAILED: answers differ or a variant erred' if failed else 'passed'}"
          f" ({time.perf_counter() - started:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
