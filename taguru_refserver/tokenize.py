"""The CJK-aware passage tokenizer of HTTP.md §9.4 (``passage_terms``).

Three term kinds exist: ``word`` (a lowercase ASCII alphanumeric run or a
camelCase piece), ``pair`` (two adjacent characters of a non-ASCII
alphanumeric run) and ``lone`` (a non-ASCII run of exactly one character).

The kinds can never collide, and that is visible in the spelling alone: a word
is all ASCII, a pair is two non-ASCII characters and a lone term is one. The
index therefore keys terms by their plain spelling (:func:`passage_term_keys`,
cheap to hash); :func:`passage_terms` adds the kind for callers and tests.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import Literal, Protocol

from taguru_eval._base.normalize import normalize

TermKind = Literal["word", "pair", "lone"]
Term = tuple[TermKind, str]


class _Sink(Protocol):
    """Where the passes put their keys: a list, or :class:`_FirstSeen`."""

    def append(self, key: str, /) -> None: ...

    def extend(self, keys: Iterable[str], /) -> None: ...


class _FirstSeen(dict[str, None]):
    """Keeps each key once, in first-seen order, as ``dict.fromkeys(list)`` would.

    A query of megabytes yields millions of term keys but few distinct ones;
    deduplicating as they come never builds (or frees) the long list, each of
    which is one C call holding the GIL for ~100 ms (the server's event loop
    waits that long).
    """

    def append(self, key: str, /) -> None:
        self[key] = None

    def extend(self, keys: Iterable[str], /) -> None:
        for key in keys:
            self[key] = None


# Marks that are combining (Mn/Mc) but carry no Alphabetic property although
# their canonical combining class is 0: variation selectors and Mongolian
# free variation selectors.
_NON_ALPHABETIC_MARKS = (
    (0xFE00, 0xFE0F),
    (0xE0100, 0xE01EF),
    (0x180B, 0x180D),
    (0x180F, 0x180F),
)


@lru_cache(maxsize=65536)
def _is_unicode_alphanumeric(ch: str) -> bool:
    """Rust ``char::is_alphanumeric``: the Alphabetic or the Numeric property.

    Python's ``isalnum`` misses ``Other_Alphabetic`` (vowel signs and other
    spacing or non-spacing marks of class 0, circled letters). Without a
    property table in the standard library this approximates it: a combining
    mark of canonical combining class 0 (the vowel-sign shape) counts, a
    diacritic (non-zero class) or a variation selector does not; enclosed
    Latin letters count.
    """
    if ch.isalnum():
        return True
    category = unicodedata.category(ch)
    if category in ("Mn", "Mc"):
        code = ord(ch)
        if any(low <= code <= high for low, high in _NON_ALPHABETIC_MARKS):
            return False
        return unicodedata.combining(ch) == 0 or code == 0x0345
    if category == "So":
        code = ord(ch)
        # Circled, parenthesized-free squared/negative Latin capitals and smalls.
        return 0x24B6 <= code <= 0x24E9 or 0x1F130 <= code <= 0x1F189
    return False


def _is_ascii_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _text_term_keys(text: str, out: _Sink) -> None:
    """Pass A over already-folded ``text``: words, pairs and lone characters."""
    word_start = -1  # start index of the open ASCII word, -1 when none
    prev = ""  # previous char of the open non-ASCII run, "" when none
    run_len = 0
    for index, ch in enumerate(text):
        if ch.isascii() and ch.isalnum():
            if prev:
                if run_len == 1:
                    out.append(prev)
                prev, run_len = "", 0
            if word_start < 0:
                word_start = index
            continue
        if word_start >= 0:
            out.append(text[word_start:index])
            word_start = -1
        if not ch.isascii() and _is_unicode_alphanumeric(ch):
            if prev:
                out.append(prev + ch)
            prev = ch
            run_len += 1
        elif prev:
            if run_len == 1:
                out.append(prev)
            prev, run_len = "", 0
    if word_start >= 0:
        out.append(text[word_start:])
    if prev and run_len == 1:
        out.append(prev)


def _is_camel_boundary(run: str, pos: int) -> bool:
    """A capital after a lowercase letter or digit, or the last capital of an acronym."""
    if not run[pos].isupper():
        return False
    before = run[pos - 1]
    if before.islower() or before.isdigit():
        return True
    return before.isupper() and pos + 1 < len(run) and run[pos + 1].islower()


def _camel_piece_keys(nfkc_text: str, out: _Sink) -> None:
    """Pass B: camelCase pieces of every ASCII alphanumeric run, lowercased."""
    length = len(nfkc_text)
    index = 0
    while index < length:
        if not _is_ascii_alnum(nfkc_text[index]):
            index += 1
            continue
        start = index
        while index < length and _is_ascii_alnum(nfkc_text[index]):
            index += 1
        run = nfkc_text[start:index]
        if not any(ch.isupper() for ch in run):
            continue  # every boundary starts at a capital letter
        starts = [0, *(pos for pos in range(1, len(run)) if _is_camel_boundary(run, pos))]
        if len(starts) > 1:
            ends = [*starts[1:], len(run)]
            out.extend(run[a:b].lower() for a, b in zip(starts, ends, strict=True))


def passage_term_keys(raw: str) -> list[str]:
    """The terms of ``raw`` in order, each keyed by its spelling (see module doc)."""
    out: list[str] = []
    _text_term_keys(normalize(raw), out)
    _camel_piece_keys(unicodedata.normalize("NFKC", raw), out)
    return out


def distinct_term_keys(raw: str) -> list[str]:
    """:func:`passage_term_keys` deduplicated, keeping first-occurrence order."""
    seen = _FirstSeen()
    _text_term_keys(normalize(raw), seen)
    _camel_piece_keys(unicodedata.normalize("NFKC", raw), seen)
    return list(seen)


def term_kind(key: str) -> TermKind:
    """The kind of a term key produced by :func:`passage_term_keys`."""
    if key.isascii():
        return "word"
    return "lone" if len(key) == 1 else "pair"


def passage_terms(raw: str) -> list[Term]:
    """The full tokenizer (``passage_terms``): fold, word/pair/lone pass, camelCase pieces."""
    return [(term_kind(key), key) for key in passage_term_keys(raw)]


def text_terms(text: str) -> list[Term]:
    """Only the word/pair/lone pass over ``text`` exactly as given (no fold, no pieces)."""
    out: list[str] = []
    _text_term_keys(text, out)
    return [(term_kind(key), key) for key in out]
