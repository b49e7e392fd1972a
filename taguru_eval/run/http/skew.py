"""The version-skew probe (EVALUATE.md §2.6): one best-effort ``GET /health``."""

from __future__ import annotations

from typing import Final

from taguru_eval._base.text import one_line, trim
from taguru_eval.errors import PREFIX
from taguru_eval.run.http.bodies import parse_json
from taguru_eval.run.http.client import CallFailure, TaguruClient

PROBE_TIMEOUT_S: Final = 4.0
# The taguru version this client claims to speak: the release it follows
# (ERRATA row 26, taguru 0.9.7; EVALUATE.md §2.6 left the choice to the port).
CLAIMED_TAGURU_VERSION: Final = "0.9.7"


def skew_warning(body: str, base_url: str, cli_version: str = CLAIMED_TAGURU_VERSION) -> str | None:
    """The version-skew warning for a 200 ``/health`` body, or None (EVALUATE.md §2.6)."""
    tail = (
        "minor versions differ, and pre-1.0 a minor may change response shapes; continuing anyway"
    )
    if trim(body) == "ok":
        return (
            f"{PREFIX}warning: this CLI is {cli_version} but the server at "
            f"{base_url} answers /health as a pre-0.5 server — {tail}"
        )
    try:
        document = parse_json(body)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    version = document.get("version")
    if not isinstance(version, str):
        return None
    server = _major_minor(version)
    ours = _major_minor(cli_version)
    if server is None or ours is None or server == ours:
        return None
    return (
        f"{PREFIX}warning: this CLI is {cli_version} but the server at "
        f"{base_url} runs {version} — {tail}"
    )


def _major_minor(version: str) -> tuple[int, int] | None:
    pieces = version.split(".")
    if len(pieces) < 2:
        return None
    major, minor = pieces[0], pieces[1]
    if not (major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit()):
        return None
    return int(major), int(minor)


async def probe_version(client: TaguruClient) -> str | None:
    """Best-effort ``GET /health`` with the 4 s timeout; the warning line or None.

    The line quotes the server's version string, so it is redacted and escaped
    to one line like any other server text.
    """
    try:
        reply = await client.get_bare(["health"], timeout_s=PROBE_TIMEOUT_S)
    except CallFailure:
        return None
    warning = skew_warning(reply.text, client.base_url)
    return None if warning is None else one_line(client.redact(warning))
