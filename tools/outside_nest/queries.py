"""The queries of the check: OWASP Nest's frontend queries (frontend/src/server/queries/*.ts, trimmed to the
ported fields) and three pages of our own over the same types.  The tool adds ``__typename`` to every
selection, as Apollo Client does.  Each entry: name -> (document, variables)."""
from __future__ import annotations

from typing import Any

AUTHOR = "author { id avatarUrl login name }"

# homeQueries.ts GET_MAIN_PAGE_DATA (its posts, chapters, sponsors, stats and events are not ported).
MAIN_PAGE = """query GetMainPageData($distinct: Boolean) {
  recentProjects(limit: 3) { id createdAt key leaders name openIssuesCount repositoriesCount type }
  topContributors(hasFullName: true, limit: 40) { id avatarUrl login name }
  recentIssues(limit: 5, distinct: $distinct) { id AUTHOR_FIELDS createdAt organizationName repositoryName title url }
  recentPullRequests(limit: 5, distinct: $distinct) {
    id AUTHOR_FIELDS createdAt organizationName repositoryName title url }
  recentReleases(limit: 5, distinct: $distinct) {
    id AUTHOR_FIELDS name organizationName publishedAt repositoryName tagName url }
  recentMilestones(limit: 5, distinct: $distinct) {
    id AUTHOR_FIELDS title openIssuesCount closedIssuesCount repositoryName organizationName createdAt url }
}""".replace("AUTHOR_FIELDS", AUTHOR)

# repositoryQueries.ts GET_REPOSITORY_DATA (as written).
REPOSITORY = """query GetRepositoryData($repositoryKey: String!, $organizationKey: String!) {
  repository(repositoryKey: $repositoryKey, organizationKey: $organizationKey) {
    id commitsCount contributorsCount createdAt description forksCount isArchived key
    issues { id AUTHOR_FIELDS organizationName repositoryName createdAt title url }
    languages license name openIssuesCount
    organization { id login name }
    project { id key name }
    releases { id AUTHOR_FIELDS isPreRelease name organizationName publishedAt repositoryName tagName }
    size starsCount topics updatedAt url
    recentMilestones(limit: 5) {
      id AUTHOR_FIELDS title openIssuesCount closedIssuesCount repositoryName organizationName createdAt url }
  }
  topContributors(organization: $organizationKey, repository: $repositoryKey) { id avatarUrl login name }
  recentPullRequests(limit: 5, organization: $organizationKey, repository: $repositoryKey) {
    id AUTHOR_FIELDS createdAt organizationName repositoryName title url }
}""".replace("AUTHOR_FIELDS", AUTHOR)

# projectQueries.ts GET_PROJECT_DATA (entityChannels and the *Days metrics are not ported).
PROJECT = """query GetProject($key: String!) {
  project(key: $key) {
    contributionData contributionStats contributorsCount
    entityLeaders { description id memberName member { avatarUrl id login name } }
    forksCount id isActive issuesCount key languages leaders level name
    healthMetricsList(limit: 30) {
      id createdAt forksCount lastCommitDaysRequirement lastReleaseDaysRequirement openIssuesCount
      openPullRequestsCount score starsCount unassignedIssuesCount unansweredIssuesCount }
    recentIssues { author { id avatarUrl login name url } createdAt organizationName repositoryName title url }
    recentReleases { id AUTHOR_FIELDS name organizationName publishedAt repositoryName tagName url }
    repositories {
      id contributorsCount forksCount isArchived key name openIssuesCount organization { login }
      starsCount subscribersCount url }
    repositoriesCount starsCount summary topics type updatedAt url
    recentMilestones(limit: 5) {
      AUTHOR_FIELDS title openIssuesCount closedIssuesCount repositoryName organizationName createdAt url }
    recentPullRequests { AUTHOR_FIELDS createdAt organizationName repositoryName title url }
  }
  topContributors(project: $key) { id avatarUrl login name }
}""".replace("AUTHOR_FIELDS", AUTHOR)

# organizationQueries.ts GET_ORGANIZATION_DATA (as written).
ORGANIZATION = """query GetOrganizationData($login: String!) {
  organization(login: $login) {
    id avatarUrl collaboratorsCount company createdAt description email followersCount location login name
    stats { totalContributors totalForks totalIssues totalRepositories totalStars }
    updatedAt url
  }
  topContributors(organization: $login) { id avatarUrl login name }
  recentPullRequests(limit: 5, organization: $login, distinct: true) {
    id AUTHOR_FIELDS createdAt organizationName repositoryName title url }
  recentReleases(limit: 5, organization: $login, distinct: true) {
    id AUTHOR_FIELDS name organizationName publishedAt repositoryName tagName url }
  recentMilestones(limit: 5, organization: $login, distinct: true) {
    id AUTHOR_FIELDS title openIssuesCount closedIssuesCount repositoryName organizationName createdAt url }
  repositories(organization: $login, limit: 12) {
    id contributorsCount forksCount isArchived key name openIssuesCount organization { id login } starsCount url }
  recentIssues(limit: 5, organization: $login, distinct: true) {
    id AUTHOR_FIELDS createdAt organizationName repositoryName title url }
}""".replace("AUTHOR_FIELDS", AUTHOR)

# userQueries.ts GET_USER_DATA (as written).
USER = """query GetUserData($key: String!) {
  recentIssues(limit: 5, login: $key) { id createdAt organizationName repositoryName title url }
  recentMilestones(limit: 5, login: $key) {
    id title openIssuesCount closedIssuesCount repositoryName organizationName createdAt url }
  recentPullRequests(limit: 5, login: $key) { id createdAt organizationName repositoryName title url }
  recentReleases(limit: 5, login: $key) {
    id isPreRelease name publishedAt organizationName repositoryName tagName url }
  topContributedRepositories(login: $key) {
    id contributorsCount forksCount isArchived key name openIssuesCount organization { id login }
    starsCount subscribersCount url }
  user(login: $key) {
    avatarUrl badges { cssClass description id name weight } bio company contributionData contributionsCount
    createdAt email followersCount followingCount id issuesCount location login name publicRepositoriesCount
    releasesCount updatedAt url }
}"""

# Ours: the issue view's fields (issueQueries.ts ModuleIssueViewFields.issueByNumber) over a list of issues.
ISSUE_LIST = """query IssueList {
  recentIssues(limit: 12) {
    id number title body url state isMerged organizationName repositoryName
    assignees { id login name avatarUrl }
    labels
    pullRequests(limit: 4, offset: 0) { id title url state createdAt mergedAt author { id login name avatarUrl } }
  }
}"""

# Ours: a projects page (every project's latest health, issues, repositories and leaders).
PROJECT_LIST = """query ProjectList {
  recentProjects(limit: 12) {
    id key name level issuesCount
    healthMetricsLatest { id score lastCommitDaysRequirement projectName }
    recentIssues { id title author { id login } }
    repositories { id name latestRelease organization { id login } }
    entityLeaders { id memberName member { id login isGsocMentor isOwaspBoardMember } }
  }
}"""

# Ours: an organization's repositories with their releases, milestones and contributors.
REPOSITORY_LIST = """query RepositoryList($login: String!) {
  repositories(organization: $login, limit: 12) {
    id name project { id key name }
    releases { id tagName projectName url author { id login badges { id name } } }
    recentMilestones(limit: 3) { id title progress author { id login firstOwaspContributionAt } }
    topContributors { id login contributionsCount }
  }
}"""

QUERIES: dict[str, tuple[str, dict[str, Any]]] = {
    "home": (MAIN_PAGE, {"distinct": False}),
    "home distinct": (MAIN_PAGE, {"distinct": True}),
    "repository": (REPOSITORY, {"repositoryKey": "www-project-owasp-0", "organizationKey": "owasp"}),
    "project": (PROJECT, {"key": "p1"}),
    "organization": (ORGANIZATION, {"login": "owasp"}),
    "user": (USER, {"key": "alan-1"}),
    "issue list": (ISSUE_LIST, {}),
    "project list": (PROJECT_LIST, {}),
    "repository list": (REPOSITORY_LIST, {"login": "owasp-amass"}),
}
