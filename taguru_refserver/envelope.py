"""taguru's three response families (HTTP.md §1.1, §4) and its JSON number layout (§8.2).

Every handler answers through ``ok`` / ``bare`` / ``error_response`` so the
envelope keys, the error-code-to-status table and the float text live in one
place. Bodies are serialised by :func:`taguru_eval.text.dumps_json`, which
spells floats the way serde_json does; a value wrapped in ``F32`` is written
with the shortest digits that round-trip as binary32, the way taguru writes
passage scores (``0.28768212``, never ``0.28768211603164673``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from starlette.responses import Response

from taguru_eval._base.text import dumps_json

JSON_MEDIA_TYPE = "application/json"

# ErrorCode::status (HTTP.md §4.2). malformed_request is 400/415/422 by cause,
# so callers pass the status for it explicitly.
STATUS_BY_CODE: dict[str, int] = {
    "malformed_request": 400,
    "invalid_argument": 400,
    "over_limit": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "read_only_replica": 403,
    "no_context": 404,
    "no_source": 404,
    "no_paragraph": 404,
    "no_group": 404,
    "no_schema": 404,
    "unknown_path": 404,
    "method_not_allowed": 405,
    "timeout": 408,
    "already_exists": 409,
    "conflict": 409,
    "stale_cursor": 410,
    "payload_too_large": 413,
    "rate_limited": 429,
    "internal": 500,
    "embeddings_unconfigured": 501,
    "embeddings_failed": 502,
    "shard_unreachable": 502,
    "overloaded": 503,
    "unhealthy": 503,
    "maintenance": 503,
    "storage_full": 507,
}

MAX_LISTED_ISSUES = 20


@dataclass(frozen=True)
class Issue:
    """One problem of a refused write (HTTP.md §4.1 ``issues[]``)."""

    path: str
    kind: str
    expected: str
    actual: str

    def to_wire(self) -> dict[str, object]:
        return {
            "path": self.path,
            "kind": self.kind,
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(eq=False)
class ApiError(Exception):
    """A refusal rendered as taguru's error envelope.

    ``status`` defaults to the code's status; framework rejections pass their
    own (415/422 for ``malformed_request``).
    """

    code: str
    message: str
    status: int | None = None
    issues: list[Issue] = field(default_factory=list)
    integrity: str | None = None
    retryable_after_correction: bool | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def http_status(self) -> int:
        if self.status is not None:
            return self.status
        return STATUS_BY_CODE.get(self.code, 500)

    def body(self, elapsed: float) -> dict[str, object]:
        payload: dict[str, object] = {
            "status": "error",
            "code": self.code,
            "error": self.message,
            "time": elapsed,
        }
        if self.issues:
            payload["issues"] = [issue.to_wire() for issue in self.issues[:MAX_LISTED_ISSUES]]
            payload["issues_total"] = len(self.issues)
        if self.integrity is not None:
            payload["integrity"] = self.integrity
        if self.retryable_after_correction is not None:
            payload["retryable_after_correction"] = self.retryable_after_correction
        return payload


@dataclass(frozen=True)
class Enveloped:
    """A handler result plus optional success-envelope keys beside ``result``.

    Only a schema ``warn``-mode association write uses them: ``issues`` (at
    most 20 listed) and ``schema_violations`` (the true count), HTTP.md §1.1.
    """

    result: object
    issues: list[Issue] = field(default_factory=list)

    def extra(self) -> dict[str, object]:
        if not self.issues:
            return {}
        return {
            "issues": [issue.to_wire() for issue in self.issues[:MAX_LISTED_ISSUES]],
            "schema_violations": len(self.issues),
        }


def json_response(
    payload: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        dumps_json(payload).encode("utf-8"),
        status_code=status,
        media_type=JSON_MEDIA_TYPE,
        headers=dict(headers) if headers else None,
    )


def ok(result: object, elapsed: float, extra: Mapping[str, object] | None = None) -> Response:
    """The enveloped success ``{"result", "status": "ok", "time"}`` (HTTP.md §1.1)."""
    payload: dict[str, object] = {"result": result, "status": "ok", "time": elapsed}
    if extra:
        payload.update(extra)
    return json_response(payload)


def bare(payload: object) -> Response:
    """An un-enveloped JSON body (``/health``, ``/version``)."""
    return json_response(payload)


def error_response(error: ApiError, elapsed: float) -> Response:
    return json_response(error.body(elapsed), error.http_status, error.headers)
