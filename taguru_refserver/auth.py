"""Bearer-token auth with roles, as taguru does it (HTTP.md §5).

No key configured means auth is off: every request is allowed without a
header. Otherwise every non-exempt request must carry ``Authorization:
Bearer <token>`` naming a known key (401 otherwise), and the key's role must
reach the route's minimum role and, for a scoped key, its grant must name the
context (403 otherwise). The server's ``--token`` is an
unscoped key, which taguru treats as ``admin``; ``--read-token`` is a ``read``
key, enough for every call ``evaluate`` makes.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from taguru_refserver.envelope import ApiError

Role = Literal["read", "write", "admin"]
ROLE_RANK: dict[str, int] = {"read": 0, "write": 1, "admin": 2}

UNAUTHORIZED_MESSAGE = "missing or invalid bearer token (send Authorization: Bearer <token>)"
_BEARER = re.compile(r"bearer +(.+)", re.IGNORECASE)


@dataclass(frozen=True)
class ApiKey:
    """One configured key: its name (shown in 403 texts), secret, role and grant.

    ``contexts`` None is taguru's unscoped key (every context); a tuple is a
    ``TAGURU_KEY_SCOPES`` grant naming the only contexts the key may touch.
    """

    name: str
    token: str
    role: Role
    contexts: tuple[str, ...] | None = None

    def grants(self, context: str) -> bool:
        return self.contexts is None or context in self.contexts

    def __repr__(self) -> str:  # never print the secret
        return f"ApiKey(name={self.name!r}, role={self.role!r})"


def keys_from_tokens(token: str | None, read_token: str | None) -> list[ApiKey]:
    """The keys of ``serve --token T --read-token R`` (empty or missing tokens are ignored)."""
    keys: list[ApiKey] = []
    if token:
        keys.append(ApiKey(name="default", token=token, role="admin"))
    if read_token:
        keys.append(ApiKey(name="read", token=read_token, role="read"))
    return keys


class KeyRing:
    """The configured keys; an empty ring disables auth."""

    def __init__(self, keys: Sequence[ApiKey] = ()) -> None:
        self.keys = list(keys)

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def authenticate(self, authorization: Sequence[str]) -> ApiKey | None:
        """The key the request's ``Authorization`` header names; None when auth is off.

        Raises the 401 envelope for a missing, malformed, repeated or unknown header.
        """
        if not self.enabled:
            return None
        if len(authorization) != 1:
            raise _unauthorized()
        match = _BEARER.fullmatch(authorization[0].strip())
        if match is None:
            raise _unauthorized()
        presented = match.group(1).strip().encode("utf-8")
        found: ApiKey | None = None
        for key in self.keys:
            # Compare against every key so timing does not reveal which one matched.
            if hmac.compare_digest(presented, key.token.encode("utf-8")) and found is None:
                found = key
        if found is None:
            raise _unauthorized()
        return found


def require_role(key: ApiKey | None, required: Role, method: str, template: str) -> None:
    """Raise the 403 envelope when ``key``'s role is below ``required``."""
    if key is None or ROLE_RANK[key.role] >= ROLE_RANK[required]:
        return
    raise ApiError(
        "forbidden",
        f"key '{key.name}' has role '{key.role}', but {method} {template} needs '{required}'",
    )


def require_grant(key: ApiKey | None, context: str) -> None:
    """Raise the 403 envelope when a scoped ``key`` has no grant on ``context``."""
    if key is None or key.grants(context):
        return
    raise ApiError("forbidden", f"key '{key.name}' has no grant on context '{context}'")


def _unauthorized() -> ApiError:
    return ApiError("unauthorized", UNAUTHORIZED_MESSAGE, headers={"WWW-Authenticate": "Bearer"})
