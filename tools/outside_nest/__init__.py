"""A port of OWASP Nest's GraphQL schema (strawberry-django), for ``tools/outside_check_nest.py``.

Upstream: https://github.com/OWASP/Nest at commit e2c741024a77bc61320dd254cad9fe7f55065d6d
(2026-08-22), backend/src/apps/.  A Django app of its own (label ``outside_nest``), configured in-process by
the tool on SQLite in memory.

- ``models.py``: the models the schema reads, trimmed to those fields, with their relations, ``Meta.ordering``,
  managers and the properties the resolvers read (bodies verbatim):
  github/models/{common,generic_issue_model,issue,pull_request,milestone,release,repository,organization,user,
  label,repository_contributor}.py, github/models/managers/{milestone,repository_contributor}.py,
  github/models/mixins/{repository,user}.py, owasp/models/{common,project,entity_member,member_profile,
  project_health_metrics,project_health_requirements}.py, owasp/models/mixins/{common,project}.py,
  nest/models/{badge,user_badge}.py.  Model references ``"github.User"`` read ``"User"`` (one app);
  ``TimestampedModel``'s ``nest_created_at`` is an ordinary field (the fixtures set it).
- ``schema.py``: the node types and query resolvers as written (bodies verbatim):
  github/api/internal/nodes/*.py, github/api/internal/queries/*.py, owasp/api/internal/nodes/{common,project,
  entity_member,project_health_metrics}.py, owasp/api/internal/queries/project.py,
  nest/api/internal/nodes/badge.py, settings/graphql.py (the depth limiter; the optimizer is a variant here).
- ``fixtures.py``: a deterministic data set of a realistic size (no upstream counterpart).
- ``queries.py``: the frontend's own queries (frontend/src/server/queries/{home,repository,project,
  organization,user}Queries.ts) with ``__typename`` in every selection, as Apollo sends them, plus two list
  pages of our own.

Deviations, each marked where it is made: ``Project.open_issues`` leaves out OpenIssueManager's 90-day window (the
fixtures' dates are fixed), ``User.get_non_indexable_logins`` leaves out the organizations' logins (upstream
caches them for the process), ``GenericIssueModel``'s ``repository_id`` and ``project`` properties are left out
(no resolver reads them; the first shadows the foreign key's column attribute).  Python 3.11 or later (the
upstream code's ``match`` and ``StrEnum``).

Left out: the mentorship app (IssueNode's ``interested_users`` and ``task_deadline``), entity channels (their
channel is a Slack conversation), chapters, committees, posts, events, sponsors and stats.
"""
