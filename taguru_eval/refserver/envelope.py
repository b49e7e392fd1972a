"""taguru's three response families (HTTP.md §1.1, §4) and its JSON number layout (§8.2).

Every handler answers through ``ok`` / ``bare`` / ``error_response`` so the
envelope keys, the error-code-to-status table and the float text live in one
place. Floats are written the way serde_json writes them (shortest round-trip
digits, ``2.0`` not ``2``, ``1e16`` not ``1e+16``); a value wrapped in ``F32``
is written with the shortest digits that round-trip as binary32, the way
taguru writes passage scores (``0.28768212``, never ``0.28768211603164673``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from starlette.responses import Response

from taguru_eval.text import to_f32

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


class F32(float):
    """A float that is a binary32 value on the wire (scores, floors)."""

    def __new__(cls, value: float) -> F32:
        return super().__new__(cls, to_f32(value))


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


def format_f64(value: float) -> str:
    """serde_json's text for an f64 (HTTP.md §8.2)."""
    return _layout(repr(float(value)), max_kk=16, min_kk=-5)


def format_f32_wire(value: float) -> str:
    """serde_json's text for an f32: shortest digits that round-trip as binary32."""
    f32 = to_f32(value)
    for precision in range(1, 10):
        candidate = f"{f32:.{precision - 1}e}"
        try:
            round_trips = to_f32(float(candidate)) == f32
        except OverflowError:  # a short rounding of a value near the binary32 maximum
            round_trips = False
        if round_trips:
            return _layout(candidate, max_kk=13, min_kk=-6)
    return _layout(repr(f32), max_kk=13, min_kk=-6)  # pragma: no cover - 9 digits always do


def _layout(text: str, *, max_kk: int, min_kk: int) -> str:
    """Lay shortest digits out as Ryu/serde does: plain decimal or ``1.5e-7``."""
    if not math.isfinite(float(text)):
        # serde_json writes non-finite floats as null; taguru never produces them.
        return "null"
    sign = "-" if text.startswith("-") else ""
    body = text.lstrip("-")
    mantissa, _, exponent_text = body.lower().partition("e")
    exponent = int(exponent_text) if exponent_text else 0
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return f"{sign}0.0"
    # value = 0.<all digits> * 10^(len(whole) + exponent); strip leading zeros.
    leading_zeros = len(whole + fraction) - len((whole + fraction).lstrip("0"))
    point = len(whole) + exponent - leading_zeros
    digits = digits.rstrip("0")
    k = point - len(digits)  # value = digits * 10^k
    kk = point
    if k >= 0 and kk <= max_kk:
        return f"{sign}{digits}{'0' * k}.0"
    if 0 < kk <= max_kk:
        return f"{sign}{digits[:kk]}.{digits[kk:]}"
    if min_kk < kk <= 0:
        return f"{sign}0.{'0' * -kk}{digits}"
    exp = kk - 1
    if len(digits) == 1:
        return f"{sign}{digits}e{exp}"
    return f"{sign}{digits[0]}.{digits[1:]}e{exp}"


def dumps(value: object) -> str:
    """Compact JSON with serde_json's float layout and raw (unescaped) UTF-8."""
    parts: list[str] = []
    _encode(value, parts)
    return "".join(parts)


def _encode(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, F32):
        out.append(format_f32_wire(value))
    elif isinstance(value, float):
        out.append(format_f64(value))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, Mapping):
        out.append("{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(str(key), ensure_ascii=False))
            out.append(":")
            _encode(item, out)
        out.append("}")
    elif isinstance(value, Sequence):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def json_response(
    payload: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        dumps(payload).encode("utf-8"),
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
