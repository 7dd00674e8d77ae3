"""A deterministic OWASP Nest data set of a realistic size (``populate(scale)``; scale 1: ~1,700 rows).

Every timestamp is distinct (a row's index in minutes from a fixed base, shuffled by a seeded generator), so
each ``order_by`` of the schema gives one order: answers compared across variants cannot differ by ties.
"""
from __future__ import annotations

import datetime
import random
from typing import Any

from django.contrib.contenttypes.models import ContentType

from . import models as m

BASE = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
ORGANIZATIONS = ("owasp", "owasp-amass", "zaproxy")
LEVELS = ("flagship", "production", "lab", "incubator")
NAMES = ("Ada Lovelace", "Alan Turing", "Grace Hopper", "Linus T.", "Barbara Liskov", "ken", "Dennis Ritchie",
         "Margaret Hamilton", "dependabot", "Tim Berners-Lee", "Radia Perlman", "Whitfield Diffie")


class Clock:
    """Distinct, shuffled timestamps: ``next()`` never repeats one (with *ties*, one of 40 values)."""

    def __init__(self, rng: random.Random, size: int, ties: bool = False) -> None:
        self._minutes = [i % 40 for i in range(size)] if ties else list(range(size))
        rng.shuffle(self._minutes)

    def next(self) -> datetime.datetime:
        return BASE + datetime.timedelta(minutes=7 * self._minutes.pop())


def _stamps(clock: Clock) -> dict[str, Any]:
    return {"nest_created_at": clock.next(), "nest_updated_at": clock.next()}


def _users(rng: random.Random, clock: Clock, count: int) -> list[m.User]:
    users = []
    for i in range(count):
        name = NAMES[i % len(NAMES)]
        login = f"{name.split()[0].lower()}-{i}" + ("[bot]" if name == "dependabot" else "")
        users.append(m.User.objects.create(
            login=login, name=name if i % 5 else "", avatar_url=f"https://avatars.example/{i}",
            bio=f"bio {i}", company=rng.choice(["", "OWASP", "ACME"]), location=rng.choice(["", "Berlin", "Lima"]),
            followers_count=rng.randrange(500), following_count=rng.randrange(80),
            contributions_count=rng.randrange(900), public_repositories_count=rng.randrange(60),
            is_bot=name == "dependabot", has_public_member_page=i % 7 != 3,
            contribution_data={f"2024-01-0{1 + i % 9}": i}, created_at=clock.next(), updated_at=clock.next(),
            **_stamps(clock)))
    for i, user in enumerate(users):
        if i % 2 == 0:
            m.MemberProfile.objects.create(github_user=user, first_contribution_at=clock.next() if i % 4 else None,
                                           is_owasp_board_member=i % 6 == 0, is_gsoc_mentor=i % 3 == 0,
                                           linkedin_page_id=f"member-{i}" if i % 8 == 0 else "", **_stamps(clock))
    return users


def _badges(rng: random.Random, clock: Clock, users: list[m.User]) -> None:
    badges = [m.Badge.objects.create(name=n, weight=w, css_class=c, description=f"{n} badge", **_stamps(clock))
              for n, w, c in (("Staff", 1, "ribbon"), ("Leader", 2, "star"), ("Mentor", 2, "medal"),
                              ("Bug hunter", 3, "bug_slash"), ("Speaker", 4, "award"))]
    for user in users:
        for badge in rng.sample(badges, rng.randrange(3)):
            m.UserBadge.objects.create(user=user, badge=badge, is_active=rng.random() > 0.2, **_stamps(clock))


def _issue_like(rng: random.Random, clock: Clock, repo: m.Repository, i: int, kind: str) -> dict[str, Any]:
    state = rng.choice(["open", "open", "closed"])
    return {"title": f"{repo.name} {kind} {i}", "body": f"body of {kind} {i}", "state": state, "number": i + 1,
            "url": f"https://github.com/{repo.organization.login}/{repo.key}/{kind}/{i + 1}",
            "created_at": clock.next(), "updated_at": clock.next(), **_stamps(clock)}


def _repository(rng: random.Random, clock: Clock, org: m.Organization, users: list[m.User], labels: list[m.Label],
                index: int, scale: float) -> m.Repository:
    key = f"www-project-{org.login}-{index}" if index % 3 == 0 else f"{org.login}-tool-{index}"
    repo = m.Repository.objects.create(
        name=key, key=key, description=f"repository {index}",
        languages={"Python": 70.0, "JavaScript": 30.0 - index % 5},
        license=rng.choice(["MIT", "Apache-2.0", ""]), size=rng.randrange(90000), topics=["security", f"t{index % 4}"],
        is_archived=index % 11 == 10, is_fork=index % 13 == 12, commits_count=rng.randrange(9000),
        contributors_count=rng.randrange(300), forks_count=rng.randrange(900), open_issues_count=rng.randrange(90),
        stars_count=rng.randrange(9000) * 10 + index, subscribers_count=rng.randrange(90), created_at=clock.next(),
        updated_at=clock.next(), pushed_at=clock.next(), organization=org, owner=rng.choice(users), **_stamps(clock))
    milestones = [m.Milestone.objects.create(repository=repo, author=rng.choice(users),
                                             open_issues_count=rng.randrange(20), closed_issues_count=rng.randrange(20),
                                             **_issue_like(rng, clock, repo, i, "milestone"))
                  for i in range(max(1, int(4 * scale)))]
    issues = []
    for i in range(max(2, int(20 * scale))):
        issue = m.Issue.objects.create(repository=repo, author=rng.choice(users), milestone=rng.choice(milestones),
                                       comments_count=rng.randrange(4), **_issue_like(rng, clock, repo, i, "issues"))
        issue.assignees.set(rng.sample(users, rng.randrange(3)))
        issue.labels.set(rng.sample(labels, rng.randrange(4)))
        issues.append(issue)
    for i in range(max(2, int(15 * scale))):
        pr = m.PullRequest.objects.create(repository=repo, author=rng.choice(users), milestone=rng.choice(milestones),
                                          **_issue_like(rng, clock, repo, i, "pull"))
        if pr.state == "closed" and i % 2:
            pr.merged_at = clock.next()
            pr.save(update_fields=["merged_at"])
        pr.related_issues.set(rng.sample(issues, rng.randrange(3)))
        pr.assignees.set(rng.sample(users, rng.randrange(2)))
    for i in range(max(2, int(8 * scale))):
        m.Release.objects.create(repository=repo, author=rng.choice(users), name=f"{repo.name} v{i}",
                                 tag_name=f"v{i}.0",
                                 is_draft=i % 7 == 6, is_pre_release=i % 5 == 4, created_at=clock.next(),
                                 published_at=None if i % 9 == 8 else clock.next(), **_stamps(clock))
    for user in rng.sample(users, min(len(users), max(3, int(10 * scale)))):
        m.RepositoryContributor.objects.create(repository=repo, user=user, contributions_count=rng.randrange(1, 500),
                                               **_stamps(clock))
    return repo


def _projects(rng: random.Random, clock: Clock, repos: list[m.Repository], orgs: list[m.Organization],
              users: list[m.User], count: int) -> None:
    for level in LEVELS:
        m.ProjectHealthRequirements.objects.create(level=level, last_commit_days=30 * (1 + LEVELS.index(level)),
                                                   last_release_days=90, **_stamps(clock))
    project_type = ContentType.objects.get_for_model(m.Project)
    for i in range(count):
        project = m.Project.objects.create(
            name=f"OWASP Project {i}", key=f"www-project-p{i}", summary=f"summary {i}", is_active=i % 6 != 5,
            leaders_raw=[f"Leader {i}", f"@handle{i}", f"Co-leader {i}"], related_urls=[f"https://p{i}.example"],
            level=LEVELS[i % len(LEVELS)], type=rng.choice(["code", "tool", "documentation"]),
            contributors_count=rng.randrange(300), forks_count=rng.randrange(900), open_issues_count=rng.randrange(90),
            stars_count=rng.randrange(9000), languages=["Python"], topics=["security"], created_at=clock.next(),
            updated_at=clock.next(), contribution_data={"2024-02-01": i},
            contribution_stats={"idx_commits": i, "pull_requests": 2 * i, "releases_count": 3}, **_stamps(clock))
        project.repositories.set(rng.sample(repos, rng.randrange(1, 5)))
        project.organizations.set(rng.sample(orgs, 1))
        for order, user in enumerate(rng.sample(users, 4)):
            m.EntityMember.objects.create(entity_type=project_type, entity_id=project.pk, member=user,
                                          member_name=user.name or user.login, order=order, is_active=True,
                                          is_reviewed=True, role="leader" if order < 3 else "member",
                                          description=f"role {order}")
        for _ in range(6):
            m.ProjectHealthMetrics.objects.create(project=project, score=rng.randrange(100),
                                                  contributors_count=rng.randrange(300),
                                                  open_pull_requests_count=rng.randrange(30),
                                                  unanswered_issues_count=rng.randrange(30), **_stamps(clock))


def populate(scale: float = 1.0, seed: int = 40, ties: bool = False) -> dict[str, int]:
    """The data set (into the configured database); the row count per model.  With *ties*, timestamps repeat
    (40 values): orders among equal timestamps are the database's, which SQL leaves undefined."""
    rng = random.Random(seed)
    clock = Clock(rng, 200_000, ties)
    orgs = [m.Organization.objects.create(login=login, name=login.upper(), description=f"{login} org",
                                          created_at=clock.next(), updated_at=clock.next(), **_stamps(clock))
            for login in ORGANIZATIONS]
    users = _users(rng, clock, max(12, int(60 * scale)))
    _badges(rng, clock, users)
    labels = [m.Label.objects.create(name=n, description=n, **_stamps(clock))
              for n in ("bug", "enhancement", "good first issue", "help wanted", "docs", "security")]
    repos = [_repository(rng, clock, orgs[i % len(orgs)], users, labels, i, scale)
             for i in range(max(6, int(24 * scale)))]
    _projects(rng, clock, repos, orgs, users, max(4, int(12 * scale)))
    from django.apps import apps

    return {model.__name__: model.objects.count() for model in apps.get_app_config("outside_nest").get_models()}
