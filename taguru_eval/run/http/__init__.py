"""The HTTP wing of run mode: one client, its engines, bodies, URLs and version skew.

Lanes and the preflight import from here; nothing here knows a lane.
"""

from taguru_eval.run.http.bodies import BODY_CAP_BYTES, SMALL_BODY_BYTES, parse_json
from taguru_eval.run.http.client import (
    REQUEST_TIMEOUT_S,
    CallFailure,
    RawReply,
    Reply,
    TaguruClient,
    bearer_headers,
)
from taguru_eval.run.http.skew import probe_version, skew_warning
from taguru_eval.run.http.urls import build_url, encode_form, encode_segment

__all__ = [
    "BODY_CAP_BYTES",
    "REQUEST_TIMEOUT_S",
    "SMALL_BODY_BYTES",
    "CallFailure",
    "RawReply",
    "Reply",
    "TaguruClient",
    "bearer_headers",
    "build_url",
    "encode_form",
    "encode_segment",
    "parse_json",
    "probe_version",
    "skew_warning",
]
