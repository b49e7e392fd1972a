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
* :meth:`Redactor.payload` does the same inside a decoded JSON value (every
  string and every key). The raw text can spell a token with JSON escapes
  (``\\/``, ``\\u002f``) that :meth:`body` cannot see, so what a server sent is
  redacted again once decoded (:meth:`may_hide_escaped` says when that is needed).
* :meth:`Redactor.message` is for text that is only ever shown (failure
  messages, reasons, versions): the tokens — spelled plainly or with JSON
  escapes, since such text is often a body that did not decode —, any
  ``Bearer …``/``Basic …`` credential and any URL userinfo become :data:`REDACTED`.

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
# The characters JSON may write with a two-character escape besides \uXXXX.
_SHORT_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b",
                         "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}  # fmt: skip


def _hex4(unit: int) -> str:
    """``\\uXXXX`` for one UTF-16 unit, hex digits in either case, as a pattern."""
    digits = "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{unit:04x}")
    return rf"\\u{digits}"


def _escaped_spellings(secret: str) -> re.Pattern[str]:
    """Every way JSON text may spell ``secret``: each character plain, as a short
    escape, or as ``\\uXXXX`` (a surrogate pair beyond the BMP)."""
    parts = []
    for char in secret:
        code = ord(char)
        ways = [re.escape(char)]
        if char in _SHORT_ESCAPES:
            ways.append(re.escape(_SHORT_ESCAPES[char]))
        if code > 0xFFFF:
            high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            ways.append(_hex4(high) + _hex4(low))
        else:
            ways.append(_hex4(code))
        parts.append(f"(?:{'|'.join(ways)})")
    return re.compile("".join(parts))


class Redactor:
    """Replaces the configured secrets (and, in messages, credential shapes)."""

    __slots__ = ("_encoded", "_escaped", "_secrets", "_short_escapable")

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        kept = {secret for secret in secrets if secret and len(secret) >= MIN_SECRET_CHARS}
        # Longest first, so a token that contains another is replaced whole.
        self._secrets: tuple[str, ...] = tuple(sorted(kept, key=len, reverse=True))
        self._escaped = tuple(_escaped_spellings(secret) for secret in self._secrets)
        self._encoded = tuple(secret.encode("utf-8", "surrogatepass") for secret in self._secrets)
        # Without \u, raw text can only hide a secret that has a short-escapable character.
        self._short_escapable = any(set(secret) & _SHORT_ESCAPES.keys() for secret in kept)

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secret(s))"

    def body(self, text: str) -> str:
        """``text`` with every configured secret replaced; nothing else changes."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def absent_from(self, body: bytes | bytearray) -> bool:
        """Whether a raw UTF-8 JSON body can hold no configured secret, spelled
        plainly or with escapes: then neither :meth:`body` nor :meth:`payload`
        would change what it decodes to (a cheap test, true for most bodies)."""
        if not self._secrets:
            return True
        if any(secret in body for secret in self._encoded):
            return False
        return b"\\" not in body or not (self._short_escapable or b"\\u" in body)

    def may_hide_escaped(self, text: str) -> bool:
        """Whether JSON ``text`` may spell a secret with escapes, so that its decoded
        value needs :meth:`payload` (a cheap test on the raw text, false for most bodies)."""
        if not self._secrets or "\\" not in text:
            return False
        return self._short_escapable or "\\u" in text

    def payload(self, value: object) -> object:
        """A decoded JSON value with every secret replaced in its strings and keys.

        Containers are changed in place (a dict whose keys change is refilled in
        its order); the value, or its replacement when it is a string, is returned.
        """
        if isinstance(value, str):
            return self.body(value)
        pending: list[object] = [value]
        while pending:
            container = pending.pop()
            if isinstance(container, list):
                for index, item in enumerate(container):
                    if isinstance(item, str):
                        replaced = self.body(item)
                        if replaced is not item:
                            container[index] = replaced
                    elif isinstance(item, (list, dict)):
                        pending.append(item)
            elif isinstance(container, dict):
                renamed = False
                for key, item in container.items():
                    renamed = renamed or self.body(key) is not key
                    if isinstance(item, str):
                        replaced = self.body(item)
                        if replaced is not item:
                            container[key] = replaced
                    elif isinstance(item, (list, dict)):
                        pending.append(item)
                if renamed:
                    items = list(container.items())
                    container.clear()
                    container.update((self.body(key), item) for key, item in items)
        return value

    def message(self, text: str) -> str:
        """``text`` with secrets (plain or JSON-escaped), ``Bearer``/``Basic``
        credentials and URL userinfo replaced."""
        text = self.body(text)
        if "\\" in text:
            for spelling in self._escaped:
                text = spelling.sub(REDACTED, text)
        if "Bearer" in text or "Basic" in text:
            text = _CREDENTIAL.sub(rf"\1\2{REDACTED}", text)
        if "@" in text:
            text = _USERINFO.sub(rf"\1{REDACTED}@", text)
        return text
