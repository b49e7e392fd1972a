"""A loopback fake of the GitHub REST endpoints the pull-request comment uses.

List a pull request's issue comments (paged, with a ``Link`` header as GitHub
writes it), create one, update one. It keeps the comments, every request it
read, and answers 403 (a fork's read-only token) or a 5xx when told to.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import urlencode

from support.loopback import Request, Response, ScriptedServer

REPOSITORY = "acme/handbook"
PULL = 7
TOKEN = "ghs_fakeTokenThatMustNeverBePrinted0123456789"

_LIST = re.compile(rf"^/repos/{REPOSITORY}/issues/(\d+)/comments$")
_ONE = re.compile(rf"^/repos/{REPOSITORY}/issues/comments/(\d+)$")


@dataclass
class FakeGitHub:
    """The fake's state: ``comments`` by id (in creation order), the page size it
    serves, and the status it answers every request with when set."""

    per_page: int = 100
    status: int | None = None
    comments: dict[int, dict[str, object]] = field(default_factory=dict)
    next_id: int = 1000
    server: ScriptedServer | None = None

    def __post_init__(self) -> None:
        self.server = ScriptedServer(self.handle)

    @property
    def requests(self) -> list[Request]:
        assert self.server is not None
        return self.server.requests

    def add(self, body: str, *, issue: int = PULL) -> int:
        """A comment someone else wrote (the marker hunt must page past it)."""
        self.next_id += 1
        self.comments[self.next_id] = {"id": self.next_id, "body": body, "issue": issue}
        return self.next_id

    def handle(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return Response.of_json(401, {"message": "Bad credentials"})
        if self.status is not None:
            return Response.of_json(self.status, {"message": "told to fail"})
        listed = _LIST.match(request.path)
        if listed and request.method == "GET":
            return self._page(int(listed.group(1)), request)
        if listed and request.method == "POST":
            self.next_id += 1
            issue = int(listed.group(1))
            body = request.json()["body"]
            self.comments[self.next_id] = {"id": self.next_id, "body": body, "issue": issue}
            return Response.of_json(201, self._shown(self.next_id))
        one = _ONE.match(request.path)
        if one and request.method == "PATCH":
            comment_id = int(one.group(1))
            if comment_id not in self.comments:
                return Response.of_json(404, {"message": "Not Found"})
            self.comments[comment_id]["body"] = request.json()["body"]
            return Response.of_json(200, self._shown(comment_id))
        return Response.of_json(404, {"message": "Not Found"})

    def _shown(self, comment_id: int) -> dict[str, object]:
        comment = self.comments[comment_id]
        return {
            "id": comment_id,
            "body": comment["body"],
            "html_url": f"https://github.example/{REPOSITORY}/pull/{comment['issue']}"
            f"#issuecomment-{comment_id}",
        }

    def _page(self, issue: int, request: Request) -> Response:
        mine = [cid for cid, c in self.comments.items() if c["issue"] == issue]
        size = min(int(request.query.get("per_page", "30")), self.per_page)
        page = int(request.query.get("page", "1"))
        chunk = mine[(page - 1) * size : page * size]
        headers = {}
        pages = max(1, -(-len(mine) // size))
        if page < pages:
            base = f"{self.url}{request.path}"
            links = [
                f'<{base}?{urlencode({"per_page": size, "page": page + 1})}>; rel="next"',
                f'<{base}?{urlencode({"per_page": size, "page": pages})}>; rel="last"',
            ]
            headers["Link"] = ", ".join(links)
        body = json.dumps([self._shown(cid) for cid in chunk]).encode()
        return Response(200, body, {"Content-Type": "application/json", **headers})

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def mine(self, issue: int = PULL) -> list[dict[str, object]]:
        return [c for c in self.comments.values() if c["issue"] == issue]
