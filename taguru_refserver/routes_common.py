"""What every route module shares: the route-table row, the call a handler gets,
and query-string reading with taguru's refusals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from taguru_refserver.auth import ApiKey, Role
from taguru_refserver.envelope import ApiError
from taguru_refserver.model import refuse_oversized
from taguru_refserver.state import ServerState

# How a route reads its body: none (GET), a typed JSON body (415 without a JSON
# content type), or PUT /contexts/{name}'s optional body parsed whatever the
# content type (HTTP.md §4.3).
BodyMode = Literal["none", "json", "optional"]

MAX_CURSOR_BYTES = 1032


@dataclass(frozen=True)
class Call:
    """One request as a handler sees it: decoded path name, parsed body, query pairs."""

    state: ServerState
    method: str
    name: str  # the decoded {name} segment; "" on routes without one
    body: object | None
    query: dict[str, str]
    key: ApiKey | None = None  # the authenticated key; None when auth is off or exempt


Handler = Callable[[Call], object]


@dataclass(frozen=True)
class RouteSpec:
    """One row of the route table.

    ``role`` None = exempt from auth. ``enveloped`` False = the handler's
    return value is the whole body (``/health``, ``/version``).
    """

    method: str
    template: str
    role: Role | None
    handler: Handler
    body: BodyMode = "none"
    enveloped: bool = True

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self.template.strip("/").split("/"))


def query_uint(call: Call, key: str, default: int) -> int:
    """A ``usize`` query parameter; a non-integer is taguru's 400 query rejection."""
    raw = call.query.get(key)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit():
        raise ApiError(
            "malformed_request",
            f"Failed to deserialize query string: {key}: invalid digit found in string",
        )
    return int(raw)


def query_cursor(call: Call, key: str) -> str | None:
    """``after`` / ``prefix``: at most 1032 bytes (HTTP.md §6.4)."""
    value = call.query.get(key)
    if value is not None:
        refuse_oversized(key, value, MAX_CURSOR_BYTES)
    return value


def query_flag(call: Call, key: str) -> bool:
    raw = call.query.get(key)
    if raw is None:
        return False
    if raw in ("true", "false"):
        return raw == "true"
    raise ApiError(
        "malformed_request",
        f"Failed to deserialize query string: {key}: provided string was not `true` or `false`",
    )
