""" "Did you mean …?": the closest known names to a mistyped one (difflib).

A flag is compared by its word (``--contxt`` → ``--context``); a dotted metric name is
compared whole and by its last part, each also spelled with ``@`` read as
``_at_`` and ``-`` as ``_``, so ``recall@k`` finds ``recall.recall_at_k`` and
``mrr`` finds every ``*.mrr``; a hyphenated name is also compared by each of its
words (``golden`` finds ``import-golden``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Final

CUTOFF: Final = 0.7
"""Below it two spellings share too little to suggest (``--bogus`` is not ``--out``)."""

MAX_SUGGESTIONS: Final = 3


def _spellings(name: str) -> set[str]:
    # A flag's dashes are shared by every flag: only the word after them counts.
    folded = name.casefold().lstrip("-")
    forms = {folded, folded.replace("@", "_at_").replace("-", "_")}
    forms.update(form.rsplit(".", 1)[1] for form in list(forms) if "." in form.strip("."))
    # A hyphenated word by each of its words: 'golden' finds 'import-golden'.
    forms.update(part for part in folded.split("-") if len(part) > 2)
    return forms


def close_matches(word: str, candidates: Iterable[str]) -> list[str]:
    """The known names closest to ``word``: every one tied for the best score
    (at most :data:`MAX_SUGGESTIONS`, in the candidates' order), or none when
    nothing reaches :data:`CUTOFF`. ``word`` itself is never suggested."""
    typed = _spellings(word)
    scored: list[tuple[float, str]] = []
    for name in dict.fromkeys(candidates):
        if name == word:
            continue
        score = max(
            difflib.SequenceMatcher(None, mine, theirs).ratio()
            for mine in typed
            for theirs in _spellings(name)
        )
        if score >= CUTOFF:
            scored.append((score, name))
    if not scored:
        return []
    best = max(score for score, _ in scored)
    return [name for score, name in scored if score == best][:MAX_SUGGESTIONS]


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """``did you mean '--context'?`` (or ``'a' or 'b'``), or ``None``."""
    found = close_matches(word, candidates)
    if not found:
        return None
    quoted = [f"'{name}'" for name in found]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"did you mean {listed}?"
