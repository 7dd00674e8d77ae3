"""OWASP Nest's models, trimmed to what the schema reads (see the package docstring for the upstream files).

Fields, relations, ``Meta.ordering``, managers and the properties the resolvers read are as upstream; property
bodies are verbatim.  Dropped: GitHub sync (``from_github``, ``update_data``, ``bulk_save``), AI summaries,
indexes, and the fields no resolver reads.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any

from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import Q, Sum

GITHUB_ACTIONS_USER_LOGIN = "actions-user"
GITHUB_GHOST_USER_LOGIN = "ghost"
OWASP_FOUNDATION_LOGIN = "OWASPFoundation"
OWASP_GITHUB_IO = "owasp.github.io"
CONTRIBUTOR_FULL_NAME_REGEX = r"[^\W\d_]{2,}(\s+([^\W\d_]\.|[^\W\d_]{2,}))+"
MAX_LEADERS_COUNT = 5


class TimestampedModel(models.Model):
    class Meta:
        abstract = True

    nest_created_at = models.DateTimeField()
    nest_updated_at = models.DateTimeField()


class GenericUserModel(models.Model):
    class Meta:
        abstract = True

    name = models.CharField(max_length=200, blank=True, default="")
    login = models.CharField(max_length=100, unique=True)
    email = models.EmailField(max_length=100, default="", blank=True)
    avatar_url = models.URLField(max_length=200, default="")
    company = models.CharField(max_length=200, blank=True, default="")
    location = models.CharField(max_length=200, default="", blank=True)
    collaborators_count = models.PositiveIntegerField(default=0)
    following_count = models.PositiveIntegerField(default=0)
    followers_count = models.PositiveIntegerField(default=0)
    public_repositories_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    @property
    def nest_key(self):
        return self.login

    @property
    def title(self) -> str:
        return (
            f"{self.name} ({self.login})" if self.name and self.name != self.login else self.login
        )

    @property
    def url(self) -> str:
        return f"https://github.com/{self.login.lower()}"


class Organization(GenericUserModel, TimestampedModel):
    description = models.CharField(max_length=1000, blank=True, default="")
    is_owasp_related_organization = models.BooleanField(default=True)

    @staticmethod
    def get_logins():
        return set(Organization.objects.values_list("login", flat=True))


class User(GenericUserModel, TimestampedModel):
    bio = models.TextField(max_length=1000, blank=True, default="")
    is_bot = models.BooleanField(default=False)
    has_public_member_page = models.BooleanField(default=True)
    is_owasp_staff = models.BooleanField(default=False)
    contributions_count = models.PositiveIntegerField(default=0)
    contribution_data = models.JSONField(default=dict, blank=True, null=True)

    def __str__(self) -> str:
        return self.title

    @property
    def issues(self):
        return self.created_issues.all()

    @property
    def releases(self):
        return self.created_releases.all()

    @staticmethod
    def get_non_indexable_logins() -> set:
        # Upstream caches Organization.get_logins() with lru_cache; a constant set here keeps counts per query.
        return {GITHUB_ACTIONS_USER_LOGIN, GITHUB_GHOST_USER_LOGIN, OWASP_FOUNDATION_LOGIN}

    # UserIndexMixin (github/models/mixins/user.py).
    @property
    def idx_created_at(self) -> str:
        return self.created_at.isoformat()

    @property
    def idx_issues_count(self) -> int:
        return self.issues.count()

    @property
    def idx_releases_count(self) -> int:
        return self.releases.count()

    @property
    def idx_updated_at(self) -> str:
        return self.updated_at.isoformat()


class MemberProfile(TimestampedModel):
    github_user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="owasp_profile")
    first_contribution_at = models.DateTimeField(blank=True, null=True)
    is_owasp_board_member = models.BooleanField(default=False)
    is_former_owasp_staff = models.BooleanField(default=False)
    is_gsoc_mentor = models.BooleanField(default=False)
    linkedin_page_id = models.CharField(max_length=100, blank=True, default="")


class Badge(TimestampedModel):
    class Meta:
        ordering = ["weight", "name"]

    css_class = models.CharField(max_length=255, default="medal")
    description = models.CharField(max_length=255, blank=True, default="")
    name = models.CharField(max_length=255, unique=True)
    weight = models.PositiveSmallIntegerField(default=0)


class UserBadge(TimestampedModel):
    class Meta:
        unique_together = ("badge", "user")

    is_active = models.BooleanField(default=True)
    badge = models.ForeignKey(Badge, related_name="users", on_delete=models.CASCADE)
    user = models.ForeignKey(User, related_name="user_badges", on_delete=models.CASCADE)


class Label(TimestampedModel):
    name = models.CharField(max_length=100)
    description = models.CharField(max_length=200)


class RepositoryContributorQuerySet(models.QuerySet):
    def by_humans(self) -> RepositoryContributorQuerySet:
        return self.exclude(
            Q(user__is_bot=True)
            | Q(user__login__in=User.get_non_indexable_logins())
            | Q(user__login__endswith="Bot")
            | Q(user__login__endswith="-bot")
        )

    def to_community_repositories(self) -> RepositoryContributorQuerySet:
        return self.exclude(
            Q(repository__is_fork=True)
            | Q(repository__name__in=(OWASP_GITHUB_IO,))
            | Q(repository__organization__is_owasp_related_organization=False),
        )


class RepositoryContributorManager(models.Manager):
    def get_queryset(self) -> RepositoryContributorQuerySet:
        return RepositoryContributorQuerySet(self.model, using=self._db).select_related("repository", "user")

    def by_humans(self) -> RepositoryContributorQuerySet:
        return self.get_queryset().by_humans()

    def to_community_repositories(self) -> RepositoryContributorQuerySet:
        return self.get_queryset().to_community_repositories()


class Repository(TimestampedModel):
    name = models.CharField(max_length=100)
    key = models.CharField(max_length=100)
    description = models.CharField(max_length=1000, default="", blank=True)
    languages = models.JSONField(default=dict, blank=True)
    license = models.CharField(max_length=100, default="")
    size = models.PositiveIntegerField(default=0)
    topics = models.JSONField(default=list, blank=True)
    is_archived = models.BooleanField(default=False)
    is_fork = models.BooleanField(default=False)
    commits_count = models.PositiveIntegerField(default=0)
    contributors_count = models.PositiveIntegerField(default=0)
    forks_count = models.PositiveIntegerField(default=0)
    open_issues_count = models.PositiveIntegerField(default=0)
    stars_count = models.PositiveIntegerField(default=0)
    subscribers_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    pushed_at = models.DateTimeField()
    organization = models.ForeignKey(
        Organization, related_name="repositories", blank=True, null=True, on_delete=models.SET_NULL
    )
    owner = models.ForeignKey(User, blank=True, null=True, on_delete=models.SET_NULL)

    @property
    def latest_release(self):
        return self.published_releases.order_by("-published_at").first()

    @property
    def path(self) -> str:
        return f"{self.owner.login}/{self.name}"

    @property
    def project(self):
        return self.project_set.first()

    @property
    def published_releases(self):
        return self.releases.filter(
            is_draft=False,
            is_pre_release=False,
            published_at__isnull=False,
        )

    @property
    def recent_milestones(self):
        return self.milestones.order_by("-created_at") if self.pk else []

    @property
    def url(self) -> str:
        return f"https://github.com/{self.path}"

    # RepositoryIndexMixin (github/models/mixins/repository.py).
    @property
    def idx_top_contributors(self) -> list[dict[str, Any]]:
        return RepositoryContributor.get_top_contributors(repository=self.key)


class GenericIssueModel(TimestampedModel):
    class Meta:
        abstract = True

    class IssueState(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    title = models.CharField(max_length=1000)
    body = models.TextField(default="")
    state = models.CharField(max_length=6, choices=IssueState.choices, default=IssueState.OPEN)
    url = models.URLField(max_length=500, default="")
    number = models.PositiveBigIntegerField(default=0)
    closed_at = models.DateTimeField(blank=True, null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(db_index=True)


class OpenMilestoneManager(models.Manager):
    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(state="open")


class ClosedMilestoneManager(models.Manager):
    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(state="closed")


class Milestone(GenericIssueModel):
    objects = models.Manager()
    open_milestones = OpenMilestoneManager()
    closed_milestones = ClosedMilestoneManager()

    class Meta:
        ordering = ["-updated_at", "-state"]

    open_issues_count = models.PositiveIntegerField(default=0)
    closed_issues_count = models.PositiveIntegerField(default=0)
    author = models.ForeignKey(User, on_delete=models.CASCADE, related_name="milestones", blank=True, null=True)
    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, related_name="milestones", blank=True, null=True
    )
    labels = models.ManyToManyField(Label, related_name="milestones", blank=True)


class Issue(GenericIssueModel):
    objects = models.Manager()

    class Meta:
        ordering = ("-updated_at", "-state")

    comments_count = models.PositiveIntegerField(default=0)
    author = models.ForeignKey(
        User, on_delete=models.SET_NULL, blank=True, null=True, related_name="created_issues"
    )
    milestone = models.ForeignKey(Milestone, on_delete=models.CASCADE, blank=True, null=True, related_name="issues")
    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, blank=True, null=True, related_name="issues"
    )
    assignees = models.ManyToManyField(User, related_name="issue", blank=True)
    labels = models.ManyToManyField(Label, related_name="issue", blank=True)


class PullRequest(GenericIssueModel):
    objects = models.Manager()

    class Meta:
        ordering = ("-updated_at", "-state")

    merged_at = models.DateTimeField(blank=True, null=True)
    author = models.ForeignKey(
        User, on_delete=models.SET_NULL, blank=True, null=True, related_name="created_pull_requests"
    )
    milestone = models.ForeignKey(
        Milestone, on_delete=models.CASCADE, blank=True, null=True, related_name="pull_requests"
    )
    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, blank=True, null=True, related_name="pull_requests"
    )
    assignees = models.ManyToManyField(User, related_name="assigned_pull_requests", blank=True)
    labels = models.ManyToManyField(Label, related_name="pull_request_labels", blank=True)
    related_issues = models.ManyToManyField(Issue, related_name="pull_requests", blank=True)


class Release(TimestampedModel):
    name = models.CharField(max_length=200)
    tag_name = models.CharField(max_length=100)
    is_draft = models.BooleanField(default=False)
    is_pre_release = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    published_at = models.DateTimeField(blank=True, null=True)
    author = models.ForeignKey(
        User, on_delete=models.SET_NULL, blank=True, null=True, related_name="created_releases"
    )
    repository = models.ForeignKey(
        Repository, on_delete=models.SET_NULL, blank=True, null=True, related_name="releases"
    )

    def __str__(self) -> str:
        return f"{self.name} by {self.author}"

    @property
    def url(self) -> str:
        return f"{self.repository.url}/releases/tag/{self.tag_name}"


class RepositoryContributor(TimestampedModel):
    objects = RepositoryContributorManager()

    class Meta:
        unique_together = ("repository", "user")

    contributions_count = models.PositiveIntegerField(default=0)
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE)
    user = models.ForeignKey(User, on_delete=models.CASCADE)

    @classmethod
    def get_top_contributors(
        cls,
        *,
        chapter=None,
        committee=None,
        excluded_usernames: list[str] | None = None,
        has_full_name=False,
        limit=15,
        organization=None,
        project=None,
        repository=None,
    ):
        queryset = (
            cls.objects.by_humans()
            .to_community_repositories()
            .select_related("repository__project", "user")
        )
        if excluded_usernames:
            queryset = queryset.exclude(user__login__in=excluded_usernames)
        if has_full_name:
            queryset = queryset.filter(user__name__regex=CONTRIBUTOR_FULL_NAME_REGEX)
        if project:
            queryset = queryset.filter(repository__project__key__iexact=f"www-project-{project}")
        elif chapter:
            queryset = queryset.filter(repository__key__iexact=f"www-chapter-{chapter}")
        elif committee:
            queryset = queryset.filter(repository__key__iexact=f"www-committee-{committee}")
        if organization:
            queryset = queryset.select_related(
                "repository__organization",
            ).filter(
                repository__organization__login=organization,
            )
        if repository:
            queryset = queryset.filter(repository__name__iexact=repository)
        if not (chapter or committee or repository):
            queryset = queryset.filter(repository__project__isnull=False)
        top_contributors = (
            (
                queryset.values(
                    "user__avatar_url",
                    "user__login",
                    "user__name",
                )
                .annotate(
                    total_contributions=Sum("contributions_count"),
                )
                .order_by("-total_contributions")[:limit]
            )
            if limit > 0
            else []
        )
        return [
            {
                "avatar_url": tc["user__avatar_url"],
                "contributions_count": tc["total_contributions"],
                "id": tc["user__login"],
                "login": tc["user__login"],
                "name": tc["user__name"],
            }
            for tc in top_contributors
        ]


class EntityMember(models.Model):
    class Role(models.TextChoices):
        CANDIDATE = "candidate", "Candidate"
        LEADER = "leader", "Leader"
        MEMBER = "member", "Member"

    description = models.CharField(blank=True, default="", max_length=100)
    is_active = models.BooleanField(default=False)
    is_reviewed = models.BooleanField(default=False)
    member_email = models.EmailField(blank=True, default="")
    member_name = models.CharField(max_length=255)
    order = models.PositiveSmallIntegerField(default=0)
    role = models.CharField(max_length=9, choices=Role.choices, default=Role.LEADER)
    member = models.ForeignKey(User, blank=True, null=True, on_delete=models.CASCADE, related_name="+")
    entity = GenericForeignKey("entity_type", "entity_id")
    entity_id = models.PositiveBigIntegerField()
    entity_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)


class Project(TimestampedModel):
    # RepositoryBasedEntityModel (owasp/models/common.py).
    name = models.CharField(max_length=100)
    key = models.CharField(max_length=100, unique=True)
    summary = models.TextField(default="", blank=True)
    is_active = models.BooleanField(default=True)
    leaders_raw = models.JSONField(default=list, blank=True, null=True)
    related_urls = models.JSONField(default=list, blank=True, null=True)
    entity_members = GenericRelation(
        EntityMember,
        content_type_field="entity_type",
        object_id_field="entity_id",
        related_query_name="entity_member",
    )
    # Project (owasp/models/project.py).
    level = models.CharField(max_length=20, default="other")
    type = models.CharField(max_length=20, default="other")
    contributors_count = models.PositiveIntegerField(default=0)
    forks_count = models.PositiveIntegerField(default=0)
    open_issues_count = models.PositiveIntegerField(default=0)
    stars_count = models.PositiveIntegerField(default=0)
    languages = models.JSONField(default=list, blank=True, null=True)
    topics = models.JSONField(default=list, blank=True, null=True)
    created_at = models.DateTimeField(blank=True, null=True)
    updated_at = models.DateTimeField(blank=True, null=True)
    contribution_data = models.JSONField(default=dict, blank=True, null=True)
    contribution_stats = models.JSONField(default=dict, blank=True, null=True)
    owasp_repository = models.ForeignKey(
        Repository, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    organizations = models.ManyToManyField(Organization, blank=True)
    repositories = models.ManyToManyField(Repository, blank=True)

    @cached_property
    def _entity_leaders(self) -> list[EntityMember]:
        # RepositoryBasedEntityModel.entity_leaders (a cached_property Project's property overrides).
        return self.entity_members.filter(role=EntityMember.Role.LEADER).order_by("order")

    @property
    def entity_leaders(self) -> list[EntityMember]:
        return self._entity_leaders[:MAX_LEADERS_COUNT]

    @property
    def issues(self):
        return (
            Issue.objects.filter(
                repository__in=self.repositories.all(),
            )
            .select_related(
                "author",
                "milestone",
                "repository",
            )
            .prefetch_related(
                "assignees",
                "labels",
            )
        )

    @property
    def open_issues(self):
        # Upstream: Issue.open_issues (OpenIssueManager: created in the last 90 days, in a project, open);
        # the fixtures' dates are fixed, so the window is left out to keep answers stable.
        return Issue.objects.filter(
            repository__project__isnull=False,
            state="open",
            repository__in=self.repositories.all(),
        ).select_related(
            "repository",
        )

    @property
    def pull_requests(self):
        return (
            PullRequest.objects.filter(
                repository__in=self.repositories.all(),
            )
            .select_related(
                "author",
                "milestone",
                "repository__organization",
                "repository",
            )
            .prefetch_related(
                "assignees",
                "labels",
            )
        )

    @property
    def published_releases(self) -> models.QuerySet[Release]:
        return Release.objects.filter(
            is_draft=False,
            published_at__isnull=False,
            repository__in=self.repositories.all(),
        ).select_related(
            "author",
            "repository",
            "repository__organization",
        )

    @property
    def nest_key(self) -> str:
        return self.key.replace("www-project-", "")

    @property
    def owasp_url(self) -> str:
        return f"https://owasp.org/{self.key}"

    # ProjectIndexMixin and RepositoryBasedEntityModelMixin (owasp/models/mixins/).
    @property
    def idx_issues_count(self) -> int:
        return self.open_issues.count()

    @property
    def idx_key(self) -> str:
        return self.key.replace("www-project-", "")

    @property
    def idx_languages(self) -> list[str]:
        return self.languages

    @property
    def idx_leaders(self):
        return [leader for leader in self.leaders_raw if not leader.startswith("@")]

    @property
    def idx_repositories_count(self) -> int:
        return self.repositories.count()

    @property
    def idx_top_contributors(self) -> list:
        return RepositoryContributor.get_top_contributors(project=self.key)

    @property
    def idx_topics(self):
        return self.topics

    @property
    def idx_updated_at(self) -> str:
        return self.updated_at.isoformat() if self.updated_at else ""

    @property
    def idx_url(self):
        return self.owasp_url


class ProjectHealthRequirements(TimestampedModel):
    level = models.CharField(max_length=20, unique=True)
    last_commit_days = models.PositiveIntegerField(default=0)
    last_release_days = models.PositiveIntegerField(default=0)


class ProjectHealthMetrics(TimestampedModel):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="health_metrics")
    contributors_count = models.PositiveIntegerField(default=0)
    forks_count = models.PositiveIntegerField(default=0)
    open_issues_count = models.PositiveIntegerField(default=0)
    open_pull_requests_count = models.PositiveIntegerField(default=0)
    score = models.FloatField(null=True)
    stars_count = models.PositiveIntegerField(default=0)
    unanswered_issues_count = models.PositiveIntegerField(default=0)
    unassigned_issues_count = models.PositiveIntegerField(default=0)

    @property
    def last_commit_days_requirement(self) -> int:
        return self.project_requirements.last_commit_days if self.project_requirements else 0

    @property
    def last_release_days_requirement(self) -> int:
        return self.project_requirements.last_release_days if self.project_requirements else 0

    @cached_property
    def project_requirements(self) -> ProjectHealthRequirements | None:
        return ProjectHealthRequirements.objects.filter(level=self.project.level).first()
