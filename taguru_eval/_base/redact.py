"""Redaction of credentials in text a server sent: one step, applied where it enters.

A server may echo what it received — the ``Authorization`` header, a proxy's
credentials, a URL with ``user:password@`` — inside an error body or a reason.
Whatever it sends is stored (evaluation.json, the Parquet tables, the run
store), charted (the HTML report) and printed (preflight errors), so the
client passes every server text through one :class:`Redactor` before any of
those sinks sees it:

* :meth:`Redactor.body` replaces the configured tokens inside a whole response
  body. It is safe for data (source names, passage text): nothing but an exact
  token changes.
* :meth:`Redactor.message` is for text that is only ever shown (failure
  messages, reasons, versions): the tokens, any ``Bearer …``/``Basic …``
  credential and any URL userinfo become :data:`REDACTED`.

Tokens shorter than :data:`MIN_SECRET_CHARS` are not searched for as plain
text (they would match ordinary words); an echoed ``Bearer <token>`` is still
caught by the credential pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

REDACTED: Final = "[REDACTED]"
MIN_SECRET_CHARS: Final = 6

# An auth-scheme credential as an echoing server writes it. The scheme words are
# matched case-sensitively: taguru's own 401 text says "bearer token" in prose.
_CREDENTIAL: Final = re.compile(r"\b(Bearer|Basic)([ \t]+)[^\s\"'<>,;()\[\]{}]+")
# scheme://userinfo@ — greedy up to the last '@' before the host, as a URL parser reads it.
_USERINFO: Final = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#\"'<>]*@")


class Redactor:
    """Replaces the configured secrets (and, in messages, credential shapes)."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        kept = {secret for secret in secrets if secret and len(secret) >= MIN_SECRET_CHARS}
        # Longest first, so a token that contains another is replaced whole.
        self._secrets: tuple[str, ...] = tuple(sorted(kept, key=len, reverse=True))

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secret(s))"

    def body(self, text: str) -> str:
        """``text`` with every configured secret replaced; nothing else changes."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def message(self, text: str) -> str:
        """``text`` with secrets, ``Bearer``/``Basic`` credentials and URL userinfo replaced."""
        text = self.body(text)
        if "Bearer" in text or "Basic" in text:
            text = _CREDENTIAL.sub(rf"\1\2{REDACTED}", text)
        if "@" in text:
            text = _USERINFO.sub(rf"\1{REDACTED}@", text)
        return text
