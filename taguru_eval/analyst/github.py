"""Posting the sticky pull-request comment through GitHub's REST API (over httpx).

Three endpoints, as GitHub documents them: list a pull request's issue
comments (``GET /repos/{repo}/issues/{n}/comments``, followed page by page
through the ``Link`` header, as httpx parses it), create one (``POST`` there)
and update one (``PATCH /repos/{repo}/issues/comments/{id}``). The comment
whose body starts with this job's marker is updated in place; without one a
new comment is created.

Where it posts comes from the Actions environment: ``GITHUB_API_URL``,
``GITHUB_REPOSITORY``, ``GITHUB_TOKEN`` and the event payload at
``GITHUB_EVENT_PATH`` (the pull request's number). A 403 — a pull request from
a fork, whose token cannot write — is :class:`CommentForbidden`: the caller
prints one notice and the job goes on. The token goes into one header and
nowhere else: no message here holds it (a transport error's text is passed
through the project's redactor too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import httpx

from taguru_eval._base.redact import Redactor
from taguru_eval.contract import VERSION
from taguru_eval.errors import InputError, RunError

DEFAULT_API_URL: Final = "https://api.github.com"
PER_PAGE: Final = 100
"""Comments per listed page (GitHub's largest)."""
MAX_PAGES: Final = 100
"""Pages listed at most (10,000 comments) before giving up on finding the marker."""
TIMEOUT_SECONDS: Final = 30.0
API_VERSION: Final = "2022-11-28"

TOKEN_ENV: Final = "GITHUB_TOKEN"
API_URL_ENV: Final = "GITHUB_API_URL"
REPOSITORY_ENV: Final = "GITHUB_REPOSITORY"
EVENT_PATH_ENV: Final = "GITHUB_EVENT_PATH"


@dataclass(frozen=True)
class PullRequest:
    """Where the comment goes, and the token that may write it (never shown:
    ``repr`` leaves it out)."""

    api_url: str
    repository: str
    number: int
    token: str

    def __repr__(self) -> str:
        return f"PullRequest({self.repository}#{self.number} via {self.api_url})"


class CommentForbidden(Exception):
    """GitHub answered 403: this token may not comment here (a fork's pull request)."""

    def __init__(self, pull: PullRequest) -> None:
        super().__init__(
            f"no permission to comment on {pull.repository}#{pull.number} (HTTP 403: a pull "
            "request from a fork gets a read-only token); the comment was skipped"
        )


@dataclass(frozen=True)
class Posted:
    """What was done: ``created`` or ``updated``, and the comment's page."""

    action: Literal["created", "updated"]
    comment_id: int
    html_url: str


def pull_request_from_env(env: Mapping[str, str]) -> PullRequest:
    """The pull request the Actions environment describes; :class:`InputError` (exit 2)
    naming the variable that is missing or what the event lacks."""
    token = env.get(TOKEN_ENV, "")
    if not token:
        raise InputError(
            f"{TOKEN_ENV} is not set",
            hint=f"pass it to the step: env: {{{TOKEN_ENV}: ${{{{ github.token }}}}}} "
            "(or use --dry-run to only write the comment)",
        )
    repository = env.get(REPOSITORY_ENV, "")
    if repository.count("/") != 1:
        raise InputError(
            f"{REPOSITORY_ENV} is {'not set' if not repository else repr(repository)}",
            hint="it is owner/name, as GitHub Actions sets it",
        )
    event_path = env.get(EVENT_PATH_ENV, "")
    if not event_path:
        raise InputError(
            f"{EVENT_PATH_ENV} is not set", hint="run the comment in a pull_request workflow"
        )
    number = _pull_request_number(Path(event_path))
    api_url = env.get(API_URL_ENV) or DEFAULT_API_URL
    return PullRequest(api_url.rstrip("/"), repository, number, token)


def _pull_request_number(path: Path) -> int:
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(
            f"{path}: cannot read the event payload ({type(exc).__name__})",
            path=str(path),
            hint=f"{EVENT_PATH_ENV} names the file GitHub Actions writes",
        ) from None
    candidates: list[Any] = []
    if isinstance(event, Mapping):
        for holder in ("pull_request", "issue"):
            inner = event.get(holder)
            if isinstance(inner, Mapping):
                candidates.append(inner.get("number"))
        candidates.append(event.get("number"))
    for number in candidates:
        if isinstance(number, int) and not isinstance(number, bool) and number > 0:
            return number
    raise InputError(
        f"{path}: the event is not a pull request's (no pull_request.number)",
        path=str(path),
        field="pull_request.number",
        hint="post the comment from a pull_request (or pull_request_target) workflow only",
    )


def post_comment(
    pull: PullRequest,
    body: str,
    marker: str,
    *,
    transport: httpx.BaseTransport | None = None,
) -> Posted:
    """Update the comment that starts with ``marker``, else create one.

    Raises :class:`CommentForbidden` on a 403 and :class:`RunError` (exit 1) on any
    other failure, naming the call and the status, never the token."""
    redactor = Redactor([pull.token])
    headers = {
        "Authorization": f"Bearer {pull.token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": f"taguru_eval/{VERSION}",
    }
    with httpx.Client(
        headers=headers, timeout=TIMEOUT_SECONDS, transport=transport, follow_redirects=False
    ) as client:
        comments = f"{pull.api_url}/repos/{pull.repository}/issues/{pull.number}/comments"
        existing = _find(client, pull, comments, marker, redactor)
        if existing is None:
            answer = _call(client, pull, "POST", comments, redactor, json={"body": body})
            action: Literal["created", "updated"] = "created"
        else:
            url = f"{pull.api_url}/repos/{pull.repository}/issues/comments/{existing}"
            answer = _call(client, pull, "PATCH", url, redactor, json={"body": body})
            action = "updated"
    document = _json(answer, redactor)
    comment_id = document.get("id") if isinstance(document, Mapping) else None
    page = document.get("html_url") if isinstance(document, Mapping) else None
    return Posted(
        action,
        comment_id if isinstance(comment_id, int) else (existing or 0),
        page if isinstance(page, str) else "",
    )


def _find(
    client: httpx.Client, pull: PullRequest, url: str, marker: str, redactor: Redactor
) -> int | None:
    """The id of the first comment whose body starts with ``marker``, reading page
    after page (``rel="next"``) until one does or the pages end."""
    next_url: str | None = url
    params: dict[str, int] | None = {"per_page": PER_PAGE}
    for _page in range(MAX_PAGES):
        if next_url is None:
            return None
        answer = _call(client, pull, "GET", next_url, redactor, params=params)
        params = None  # the next link carries its own query
        listed = _json(answer, redactor)
        if not isinstance(listed, list):
            raise RunError(
                f"listing the comments of {pull.repository}#{pull.number}: GitHub answered "
                "something other than a list",
                hint="check GITHUB_API_URL points at GitHub's REST API",
            )
        for comment in listed:
            if not isinstance(comment, Mapping):
                continue
            text = comment.get("body")
            comment_id = comment.get("id")
            if isinstance(text, str) and text.startswith(marker) and isinstance(comment_id, int):
                return comment_id
        following = answer.links.get("next", {}).get("url")
        next_url = following if isinstance(following, str) else None
    return None


_DOING: Final = {
    "GET": "listing the comments of",
    "POST": "commenting on",
    "PATCH": "updating the comment on",
}


def _call(
    client: httpx.Client,
    pull: PullRequest,
    method: str,
    url: str,
    redactor: Redactor,
    **kwargs: Any,
) -> httpx.Response:
    what = _DOING[method]
    target = f"{pull.repository}#{pull.number}"
    try:
        answer = client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise RunError(
            f"{what} {target}: {type(exc).__name__}: {redactor.message(str(exc))}",
            hint="check GITHUB_API_URL and the runner's network; the gate's verdict stands",
        ) from None
    if answer.status_code == httpx.codes.FORBIDDEN:
        raise CommentForbidden(pull)
    if not answer.is_success:
        raise RunError(
            f"{what} {target}: GitHub answered HTTP {answer.status_code}",
            hint=(
                "GitHub failed; run the job again"
                if answer.status_code >= 500
                else "the job needs `permissions: pull-requests: write` and a token for this "
                "repository"
            ),
        )
    return answer


def _json(answer: httpx.Response, redactor: Redactor) -> Any:
    try:
        return answer.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RunError(
            f"GitHub answered {answer.request.method} {redactor.message(answer.request.url.path)} "
            "with a body that is not JSON",
            hint="check GITHUB_API_URL points at GitHub's REST API",
        ) from None
