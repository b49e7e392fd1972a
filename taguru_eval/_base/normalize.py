"""The name fold behind resolve, passage search and evaluate's own matching.

HTTP.md §9.1 and EVALUATE.md §4.6 pin the exact order: per-code-point full
lowercase, NFKC, per-code-point lowercase again, katakana folded to hiragana.
Lowercasing per code point (not ``str.lower`` on the whole string) matters
because Python applies the context-sensitive final-sigma rule, Rust does not.
"""

from __future__ import annotations

import unicodedata

from taguru_eval._base.text import trim

_KATAKANA_FIRST = 0x30A1  # ァ
_KATAKANA_LAST = 0x30F6  # ヶ
_KANA_SHIFT = 0x60

# ァ..ヶ -> ぁ..ゖ; ヷヸヹヺ, ー and everything else stay as they are.
_KANA_FOLD = {cp: cp - _KANA_SHIFT for cp in range(_KATAKANA_FIRST, _KATAKANA_LAST + 1)}


def _lower_per_code_point(text: str) -> str:
    # ASCII has no context-sensitive rules, so the fast whole-string lower is safe there.
    if text.isascii():
        return text.lower()
    return "".join(map(str.lower, text))


def normalize(text: str) -> str:
    """Fold ``text`` the way the reference compares names and indexes passages."""
    folded = _lower_per_code_point(text)
    folded = unicodedata.normalize("NFKC", folded)
    folded = _lower_per_code_point(folded)
    return folded.translate(_KANA_FOLD)


def normalize_entry(text: str) -> str:
    """Trim Unicode White_Space from both ends, then :func:`normalize` (EVALUATE.md §4.6)."""
    return normalize(trim(text))
