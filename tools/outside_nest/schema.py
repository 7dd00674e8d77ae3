"""OWASP Nest's strawberry-django schema: node types and query resolvers as written upstream (bodies verbatim).

See the package docstring for the upstream files.  ``schema_for(extensions)`` builds the schema as
settings/graphql.py does (its depth limiter, introspection left on), with the extensions given in place of
upstream's ``DjangoOptimizerExtension``.  No ``from __future__ import annotations``: strawberry reads the
annotations as objects.
"""
import enum
from datetime import datetime
from typing import Annotated, Any

import strawberry
import strawberry_django
from django.db import models
from django.db.models import F, OuterRef, Prefetch, Subquery, Window
from django.db.models.functions import Rank
from strawberry.extensions import QueryDepthLimiter

from .models import (
    Badge,
    EntityMember,
    GenericIssueModel,
    Issue,
    Milestone,
    Organization,
    Project,
    ProjectHealthMetrics,
    PullRequest,
    Release,
    Repository,
    RepositoryContributor,
    User,
    UserBadge,
)

OWASP_ORGANIZATION_NAME = "OWASP"
MAX_LIMIT = 1000
RECENT_ISSUES_LIMIT = 5
RECENT_RELEASES_LIMIT = 5
RECENT_PULL_REQUESTS_LIMIT = 5
CONTRIBUTORS_MAX_LIMIT = 100
MAX_RECENT_PROJECTS_LIMIT = 1000


def normalize_limit(limit: int, max_limit: int = 1000) -> int | None:
    """apps/common/utils.py."""
    try:
        limit = int(limit)
    except (TypeError, ValueError):
        return None
    if limit <= 0:
        return None
    return min(limit, max_limit)


def convert_to_camel_case(text: str) -> str:
    """apps/common/utils.py."""
    parts = text.split("_")
    offset = 1 if text.startswith("_") else 0
    head = parts[offset : offset + 1] or [text]
    segments = [f"_{head[0]}" if offset else head[0]]
    segments.extend(word.capitalize() for word in parts[offset + 1 :])
    return "".join(segments)


def deep_camelize(obj) -> dict | list | None:
    """apps/core/utils/index.py."""
    if not obj:
        return obj
    if isinstance(obj, dict):
        return {
            convert_to_camel_case(key.removeprefix("idx_")): deep_camelize(value)
            for key, value in obj.items()
        }
    if isinstance(obj, list):
        return [deep_camelize(item) for item in obj]
    return obj


# nest/api/internal/nodes/badge.py
@strawberry_django.type(Badge, fields=["css_class", "description", "id", "name", "weight"])
class BadgeNode(strawberry.relay.Node):
    """Badge node."""


# github/api/internal/nodes/user.py
USER_BADGES_PREFETCH = Prefetch(
    "user_badges",
    queryset=UserBadge.objects.filter(is_active=True)
    .select_related("badge")
    .order_by(
        "badge__weight",
        "badge__name",
    ),
    to_attr="user_badges_list",
)


@strawberry_django.type(
    User,
    fields=[
        "avatar_url", "bio", "company", "contribution_data", "contributions_count", "email", "followers_count",
        "following_count", "id", "is_owasp_staff", "location", "login", "name", "public_repositories_count",
    ],
)
class UserNode:
    """GitHub user node."""

    @strawberry_django.field(prefetch_related=[USER_BADGES_PREFETCH])
    def badges(self, root: User) -> list[BadgeNode]:
        return [user_badge.badge for user_badge in getattr(root, "user_badges_list", [])]

    @strawberry_django.field
    def created_at(self, root: User) -> str:
        return root.idx_created_at

    @strawberry_django.field(select_related=["owasp_profile"])
    def first_owasp_contribution_at(self, root: User) -> str | None:
        return (
            root.owasp_profile.first_contribution_at.isoformat()
            if hasattr(root, "owasp_profile") and root.owasp_profile.first_contribution_at
            else None
        )

    @strawberry_django.field(select_related=["owasp_profile"])
    def is_owasp_board_member(self, root: User) -> bool:
        return (
            root.owasp_profile.is_owasp_board_member if hasattr(root, "owasp_profile") else False
        )

    @strawberry_django.field(select_related=["owasp_profile"])
    def is_gsoc_mentor(self, root: User) -> bool:
        return root.owasp_profile.is_gsoc_mentor if hasattr(root, "owasp_profile") else False

    @strawberry_django.field
    def issues_count(self, root: User) -> int:
        return root.idx_issues_count

    @strawberry_django.field
    def releases_count(self, root: User) -> int:
        return root.idx_releases_count

    @strawberry_django.field
    def updated_at(self, root: User) -> str:
        return root.idx_updated_at

    @strawberry_django.field
    def url(self, root: User) -> str:
        return root.url


# github/api/internal/nodes/pull_request.py
@strawberry_django.type(PullRequest, fields=["created_at", "merged_at", "state", "title"])
class PullRequestNode(strawberry.relay.Node):
    """GitHub pull request node."""

    author: UserNode | None = strawberry_django.field()

    @strawberry_django.field(select_related=["repository__organization"])
    def organization_name(self, root: PullRequest) -> str | None:
        return (
            root.repository.organization.login
            if root.repository and root.repository.organization
            else None
        )

    @strawberry_django.field(select_related=["repository"])
    def repository_name(self, root: PullRequest) -> str | None:
        return root.repository.name if root.repository else None

    @strawberry_django.field
    def url(self, root: PullRequest) -> str:
        return root.url


# github/api/internal/nodes/issue.py
MERGED_PULL_REQUESTS_PREFETCH = Prefetch(
    "pull_requests",
    queryset=PullRequest.objects.filter(
        merged_at__isnull=False,
        state="closed",
    ),
    to_attr="merged_pull_requests",
)


@strawberry_django.type(Issue, fields=["body", "created_at", "number", "state", "title", "url"])
class IssueNode(strawberry.relay.Node):
    """GitHub issue node."""

    assignees: list[UserNode] = strawberry_django.field()
    author: UserNode | None = strawberry_django.field()

    @strawberry_django.field(prefetch_related=["pull_requests"])
    def pull_requests(self, limit: int = 4, offset: int = 0) -> list[PullRequestNode]:
        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        offset = max(0, offset)
        return list(
            self.pull_requests.all().order_by("-created_at")[offset : offset + normalized_limit]
        )

    @strawberry_django.field(select_related=["repository__organization", "repository"])
    def organization_name(self, root: Issue) -> str | None:
        return (
            root.repository.organization.login
            if root.repository and root.repository.organization
            else None
        )

    @strawberry_django.field(select_related=["repository"])
    def repository_name(self, root: Issue) -> str | None:
        return root.repository.name if root.repository else None

    @strawberry_django.field(prefetch_related=["labels"])
    def labels(self, root: Issue) -> list[str]:
        return [label.name for label in root.labels.all()]

    @strawberry_django.field(prefetch_related=[MERGED_PULL_REQUESTS_PREFETCH])
    def is_merged(self, root: Issue) -> bool:
        return bool(getattr(root, "merged_pull_requests", None))


# github/api/internal/nodes/milestone.py
@strawberry_django.type(
    Milestone,
    fields=["closed_issues_count", "created_at", "body", "open_issues_count", "state", "title", "url"],
)
class MilestoneNode(strawberry.relay.Node):
    """Github Milestone Node."""

    author: UserNode | None = strawberry_django.field()

    @strawberry_django.field(select_related=["repository__organization"])
    def organization_name(self, root: Milestone) -> str | None:
        return (
            root.repository.organization.login
            if root.repository and root.repository.organization
            else None
        )

    @strawberry_django.field
    def progress(self, root: Milestone) -> float:
        return (
            round((root.closed_issues_count / total_issues_count) * 100, 2)
            if (total_issues_count := root.closed_issues_count + root.open_issues_count)
            else 0.0
        )

    @strawberry_django.field(select_related=["repository"])
    def repository_name(self, root: Milestone) -> str | None:
        return root.repository.name if root.repository else None


# github/api/internal/nodes/organization.py
@strawberry.type
class OrganizationStatsNode:
    """Organization stats node."""

    total_contributors: int
    total_forks: int
    total_issues: int
    total_repositories: int
    total_stars: int


@strawberry_django.type(
    Organization,
    fields=[
        "avatar_url", "collaborators_count", "company", "created_at", "description", "email", "followers_count",
        "location", "login", "name", "updated_at",
    ],
)
class OrganizationNode(strawberry.relay.Node):
    """GitHub organization node."""

    @strawberry_django.field
    def stats(self, root: Organization) -> OrganizationStatsNode:
        repositories = Repository.objects.filter(organization=root)

        total_repositories = repositories.count()
        aggregated_stats = repositories.aggregate(
            total_stars=models.Sum("stars_count"),
            total_forks=models.Sum("forks_count"),
            total_issues=models.Sum("open_issues_count"),
        )

        total_stars = aggregated_stats.get("total_stars") or 0
        total_forks = aggregated_stats.get("total_forks") or 0
        total_issues = aggregated_stats.get("total_issues") or 0

        unique_contributors = (
            RepositoryContributor.objects.filter(repository__in=repositories)
            .values("user")
            .distinct()
            .count()
        )

        return OrganizationStatsNode(
            total_repositories=total_repositories,
            total_contributors=unique_contributors,
            total_stars=total_stars,
            total_forks=total_forks,
            total_issues=total_issues,
        )

    @strawberry_django.field
    def url(self, root: Organization) -> str:
        return root.url


# github/api/internal/nodes/release.py
@strawberry_django.type(Release, fields=["is_pre_release", "name", "published_at", "tag_name"])
class ReleaseNode(strawberry.relay.Node):
    """GitHub release node."""

    author: UserNode | None = strawberry_django.field()

    @strawberry_django.field(select_related=["repository__organization"])
    def organization_name(self, root: Release) -> str | None:
        return (
            root.repository.organization.login
            if root.repository and root.repository.organization
            else None
        )

    @strawberry_django.field(
        select_related=["repository"], prefetch_related=["repository__project_set"]
    )
    def project_name(self, root: Release) -> str | None:
        return (
            root.repository.project.name.lstrip(OWASP_ORGANIZATION_NAME)
            if root.repository and root.repository.project
            else None
        )

    @strawberry_django.field(select_related=["repository"])
    def repository_name(self, root: Release) -> str | None:
        return root.repository.name if root.repository else None

    @strawberry_django.field
    def url(self, root: Release) -> str:
        return root.url


# github/api/internal/nodes/repository_contributor.py
@strawberry.type
class RepositoryContributorNode:
    """Repository contributor node."""

    avatar_url: str
    contributions_count: int
    id: strawberry.ID
    login: str
    name: str
    project_key: str | None = None
    project_name: str | None = None


# github/api/internal/nodes/repository.py
@strawberry_django.type(
    Repository,
    fields=[
        "commits_count", "contributors_count", "created_at", "description", "forks_count", "is_archived", "key",
        "license", "name", "open_issues_count", "size", "stars_count", "subscribers_count", "updated_at",
    ],
)
class RepositoryNode(strawberry.relay.Node):
    """Repository node."""

    organization: OrganizationNode | None = strawberry_django.field()

    @strawberry_django.field(prefetch_related=["issues"])
    def issues(self, root: Repository) -> list[IssueNode]:
        return root.issues.order_by("-created_at")[:RECENT_ISSUES_LIMIT]

    @strawberry_django.field
    def languages(self, root: Repository) -> list[str]:
        return list(root.languages.keys())

    @strawberry_django.field
    def latest_release(self, root: Repository) -> str | None:
        return root.latest_release  # a Release: graphql-core's String serializes it with str()

    @strawberry_django.field(prefetch_related=["project_set"])
    def project(
        self, root: Repository
    ) -> Annotated["ProjectNode", strawberry.lazy("outside_nest.schema")] | None:
        return root.project

    @strawberry_django.field(prefetch_related=["milestones"])
    def recent_milestones(self, root: Repository, limit: int = 5) -> list[MilestoneNode]:
        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        return root.recent_milestones.order_by("-created_at")[:normalized_limit]

    @strawberry_django.field(prefetch_related=["releases"])
    def releases(self, root: Repository) -> list[ReleaseNode]:
        return root.published_releases.order_by("-published_at")[:RECENT_RELEASES_LIMIT]

    @strawberry_django.field
    def top_contributors(self, root: Repository) -> list[RepositoryContributorNode]:
        return [RepositoryContributorNode(**tc) for tc in root.idx_top_contributors]

    @strawberry_django.field
    def topics(self, root: Repository) -> list[str]:
        return root.topics

    @strawberry_django.field
    def url(self, root: Repository) -> str:
        return root.url


# owasp/api/internal/nodes/entity_member.py
@strawberry_django.type(
    EntityMember,
    fields=["description", "is_active", "is_reviewed", "member_email", "member_name", "order", "role"],
)
class EntityMemberNode(strawberry.relay.Node):
    """Entity member node."""

    member: UserNode | None


# owasp/api/internal/nodes/project_health_metrics.py (filters left out)
@strawberry_django.type(
    ProjectHealthMetrics,
    fields=[
        "contributors_count", "forks_count", "open_issues_count", "open_pull_requests_count", "score",
        "stars_count", "unanswered_issues_count", "unassigned_issues_count",
    ],
)
class ProjectHealthMetricsNode(strawberry.relay.Node):
    """Project health metrics node."""

    @strawberry_django.field
    def created_at(self, root: ProjectHealthMetrics) -> datetime:
        return root.nest_created_at

    @strawberry_django.field
    def last_commit_days_requirement(self, root: ProjectHealthMetrics) -> int:
        return root.last_commit_days_requirement

    @strawberry_django.field
    def last_release_days_requirement(self, root: ProjectHealthMetrics) -> int:
        return root.last_release_days_requirement

    @strawberry_django.field(select_related=["project"])
    def project_key(self, root: ProjectHealthMetrics) -> str:
        return root.project.nest_key

    @strawberry_django.field(select_related=["project"])
    def project_name(self, root: ProjectHealthMetrics) -> str:
        return root.project.name


# owasp/api/internal/nodes/common.py (entity_channels left out)
@strawberry.type
class GenericEntityNode(strawberry.relay.Node):
    """Base node class for OWASP entities with common fields and resolvers."""

    @strawberry_django.field(prefetch_related=["entity_members__member"])
    def entity_leaders(self, root) -> list[EntityMemberNode]:
        return root.entity_leaders

    @strawberry_django.field
    def leaders(self, root) -> list[str]:
        return root.idx_leaders

    @strawberry_django.field
    def related_urls(self, root) -> list[str]:
        return root.related_urls

    @strawberry_django.field
    def top_contributors(self, root) -> list[RepositoryContributorNode]:
        return [RepositoryContributorNode(**tc) for tc in root.idx_top_contributors]

    @strawberry_django.field
    def updated_at(self, root) -> str:
        return root.idx_updated_at

    @strawberry_django.field
    def url(self, root) -> str:
        return root.idx_url


# owasp/api/internal/nodes/project.py
@strawberry_django.type(
    Project,
    fields=[
        "contribution_data", "contributors_count", "created_at", "forks_count", "id", "is_active", "level",
        "name", "open_issues_count", "stars_count", "summary", "type",
    ],
)
class ProjectNode(GenericEntityNode):
    """Project node."""

    @strawberry_django.field
    def contribution_stats(self, root: Project) -> strawberry.scalars.JSON | None:
        return deep_camelize(root.contribution_stats)

    @strawberry_django.field(prefetch_related=["health_metrics"])
    def health_metrics_list(
        self, root: Project, limit: int = 30
    ) -> list[ProjectHealthMetricsNode]:
        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        return list(reversed(root.health_metrics.order_by("-nest_created_at")[:normalized_limit]))

    @strawberry_django.field(prefetch_related=["health_metrics"])
    def health_metrics_latest(self, root: Project) -> ProjectHealthMetricsNode | None:
        return root.health_metrics.order_by("-nest_created_at").first()

    @strawberry_django.field
    def issues_count(self, root: Project) -> int:
        return root.idx_issues_count

    @strawberry_django.field
    def key(self, root: Project) -> str:
        return root.idx_key

    @strawberry_django.field
    def languages(self, root: Project) -> list[str]:
        return root.idx_languages

    @strawberry_django.field
    def recent_issues(self, root: Project) -> list[IssueNode]:
        return root.issues.order_by("-created_at")[:RECENT_ISSUES_LIMIT]

    @strawberry_django.field
    def recent_milestones(self, root: Project, limit: int = 5) -> list[MilestoneNode]:
        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        return (
            Milestone.objects.filter(
                repository__in=root.repositories.all(),
            )
            .select_related(
                "repository__organization",
                "author__owasp_profile",
            )
            .prefetch_related("labels")
            .order_by("-created_at")[:normalized_limit]
        )

    @strawberry_django.field
    def recent_pull_requests(self, root: Project) -> list[PullRequestNode]:
        return root.pull_requests.order_by("-created_at")[:RECENT_PULL_REQUESTS_LIMIT]

    @strawberry_django.field
    def recent_releases(self, root: Project) -> list[ReleaseNode]:
        return root.published_releases.order_by("-published_at")[:RECENT_RELEASES_LIMIT]

    @strawberry_django.field(prefetch_related=["repositories"])
    def repositories(self, root: Project) -> list[RepositoryNode]:
        return root.repositories.filter(
            organization__isnull=False,
        ).order_by(
            "-pushed_at",
            "-updated_at",
        )

    @strawberry_django.field
    def repositories_count(self, root: Project) -> int:
        return root.idx_repositories_count

    @strawberry_django.field
    def topics(self, root: Project) -> list[str]:
        return root.idx_topics


@strawberry.enum
class MilestoneStateEnum(enum.StrEnum):
    """Milestone state filter options."""

    CLOSED = GenericIssueModel.IssueState.CLOSED.value
    OPEN = GenericIssueModel.IssueState.OPEN.value


# github/api/internal/queries/*.py, owasp/api/internal/queries/project.py
@strawberry.type
class Query:
    """Schema queries (upstream's Query mixes these in from each app's query classes)."""

    @strawberry_django.field
    def recent_issues(
        self,
        *,
        distinct: bool = False,
        limit: int = 5,
        login: str | None = None,
        organization: str | None = None,
    ) -> list[IssueNode]:
        queryset = Issue.objects.order_by(
            "-created_at",
        )
        filters = {}

        if login:
            filters["author__login"] = login
        if organization:
            filters["repository__organization__login"] = organization

        queryset = queryset.filter(**filters)

        if distinct:
            queryset = (
                queryset.annotate(
                    rank=Window(
                        expression=Rank(),
                        partition_by=[F("author_id")],
                        order_by=F("created_at").desc(),
                    )
                )
                .filter(rank=1)
                .order_by("-created_at")
            )

        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        return queryset[:normalized_limit]

    @strawberry_django.field
    def recent_milestones(
        self,
        *,
        distinct: bool = False,
        limit: int = 5,
        login: str | None = None,
        organization: str | None = None,
        state: MilestoneStateEnum | None = None,
    ) -> list[MilestoneNode]:
        match state:
            case MilestoneStateEnum.OPEN:
                milestones = Milestone.open_milestones.all()
            case MilestoneStateEnum.CLOSED:
                milestones = Milestone.closed_milestones.all()
            case _:
                milestones = Milestone.objects.all()

        if login:
            milestones = milestones.filter(
                author__login=login,
            )

        if organization:
            milestones = milestones.filter(
                repository__organization__login=organization,
            )

        if distinct:
            latest_milestone_per_author = (
                milestones.filter(author_id=OuterRef("author_id"))
                .order_by("-created_at")
                .values("id")[:1]
            )
            milestones = milestones.filter(
                id__in=Subquery(latest_milestone_per_author),
            )

        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        return milestones.order_by("-created_at")[:normalized_limit]

    @strawberry.field
    def organization(
        self,
        *,
        login: str,
    ) -> OrganizationNode | None:
        try:
            return Organization.objects.get(is_owasp_related_organization=True, login=login)
        except Organization.DoesNotExist:
            return None

    @strawberry_django.field
    def recent_pull_requests(
        self,
        *,
        distinct: bool = False,
        limit: int = 5,
        login: str | None = None,
        organization: str | None = None,
        project: str | None = None,
        repository: str | None = None,
    ) -> list[PullRequestNode]:
        queryset = PullRequest.objects.exclude(
            author__is_bot=True,
        ).order_by(
            "-created_at",
        )

        filters = {}
        if login:
            filters["author__login"] = login

        if organization:
            filters["repository__organization__login"] = organization

        queryset = queryset.filter(**filters)

        if project:
            project_instance = Project.objects.filter(key__iexact=f"www-project-{project}").first()
            if project_instance:
                queryset = queryset.filter(
                    repository_id__in=project_instance.repositories.values_list("id", flat=True)
                )
            else:
                queryset = queryset.none()

        if repository:
            queryset = queryset.filter(repository__key__iexact=repository)

        if distinct:
            queryset = (
                queryset.annotate(
                    rank=Window(
                        expression=Rank(),
                        partition_by=[F("author_id")],
                        order_by=F("created_at").desc(),
                    )
                )
                .filter(rank=1)
                .order_by("-created_at")
            )

        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        return queryset[:normalized_limit]

    @strawberry_django.field
    def recent_releases(
        self,
        *,
        distinct: bool = False,
        limit: int = 6,
        login: str | None = None,
        organization: str | None = None,
    ) -> list[ReleaseNode]:
        queryset = Release.objects.filter(
            is_draft=False,
            is_pre_release=False,
            published_at__isnull=False,
        ).order_by("-published_at")

        if login:
            queryset = queryset.filter(
                author__login=login,
            )

        if organization:
            queryset = queryset.filter(
                repository__organization__login=organization,
            )

        if distinct:
            queryset = (
                queryset.annotate(
                    rank=Window(
                        expression=Rank(),
                        partition_by=[F("author_id")],
                        order_by=F("published_at").desc(),
                    )
                )
                .filter(rank=1)
                .order_by("-published_at")
            )

        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        return queryset[:normalized_limit]

    @strawberry_django.field
    def repository(
        self,
        organization_key: str,
        repository_key: str,
    ) -> RepositoryNode | None:
        try:
            return Repository.objects.select_related("organization").get(
                key__iexact=repository_key,
                organization__login__iexact=organization_key,
            )
        except Repository.DoesNotExist:
            return None

    @strawberry_django.field
    def repositories(
        self,
        organization: str,
        *,
        limit: int = 12,
    ) -> list[RepositoryNode]:
        if (normalized_limit := normalize_limit(limit, MAX_LIMIT)) is None:
            return []

        return Repository.objects.filter(
            organization__login__iexact=organization,
        ).order_by("-stars_count")[:normalized_limit]

    @strawberry_django.field
    def top_contributors(
        self,
        *,
        chapter: str | None = None,
        committee: str | None = None,
        excluded_usernames: list[str] | None = None,
        has_full_name: bool = False,
        limit: int = 24,
        organization: str | None = None,
        project: str | None = None,
        repository: str | None = None,
    ) -> list[RepositoryContributorNode]:
        if (normalized_limit := normalize_limit(limit, CONTRIBUTORS_MAX_LIMIT)) is None:
            return []

        top_contributors = RepositoryContributor.get_top_contributors(
            chapter=chapter,
            committee=committee,
            excluded_usernames=excluded_usernames,
            has_full_name=has_full_name,
            limit=normalized_limit,
            organization=organization,
            project=project,
            repository=repository,
        )

        return [
            RepositoryContributorNode(
                avatar_url=tc["avatar_url"],
                contributions_count=tc["contributions_count"],
                id=tc["login"],
                login=tc["login"],
                name=tc["name"],
                project_key=tc.get("project_key"),
                project_name=tc.get("project_name"),
            )
            for tc in top_contributors
        ]

    @strawberry_django.field
    def top_contributed_repositories(
        self,
        login: str,
    ) -> list[RepositoryNode]:
        return [
            rc.repository
            for rc in RepositoryContributor.objects.select_related(
                "repository",
                "repository__organization",
            )
            .filter(user__login=login)
            .order_by("-contributions_count")
        ]

    @strawberry_django.field
    def user(
        self,
        login: str,
    ) -> UserNode | None:
        return (
            User.objects.filter(has_public_member_page=True, login=login)
            .prefetch_related(USER_BADGES_PREFETCH)
            .first()
        )

    @strawberry_django.field
    def project(self, key: str) -> ProjectNode | None:
        try:
            return Project.objects.get(key=f"www-project-{key}")
        except Project.DoesNotExist:
            return None

    @strawberry_django.field
    def recent_projects(self, limit: int = 8) -> list[ProjectNode]:
        if (normalized_limit := normalize_limit(limit, MAX_RECENT_PROJECTS_LIMIT)) is None:
            return []

        return Project.objects.filter(is_active=True).order_by("-created_at")[:normalized_limit]


class NestQueryDepthLimiter(QueryDepthLimiter):
    """Query depth limiter configured for the Nest schema (settings/graphql.py)."""

    def __init__(self) -> None:
        super().__init__(max_depth=5)


def schema_for(extensions: list[Any]) -> strawberry.Schema:
    """Nest's schema (settings/graphql.py) with *extensions* after its depth limiter."""
    return strawberry.Schema(query=Query, extensions=[NestQueryDepthLimiter, *extensions])
