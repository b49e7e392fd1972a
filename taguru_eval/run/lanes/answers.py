"""Answer evidence (``--answers``): a case's declared answers judged on its served window.

The check runs inside the first lane, while the hits' text is at hand, and only
its verdicts leave the lane (:class:`~taguru_eval.tables.shapes.AnswerCheck`).
The window is what the case was served up to its limit: the passage lane's
hits after any client-side budget, or under ``--assembly`` the scoring hits of
the package, of which only an admitted passage item carries text (a cited
locator or a community summary is never matched). An answer is found at rank
*r* when hit *r* is the first whose text matches it under the run's rule:

- ``normalized``: ``normalize_entry(answer)`` is a code-point substring of
  ``normalize_entry(text)`` — the quote check's folding (EVALUATE.md §4.6, §7),
  which works for any script;
- ``tokens``: citenexus's content-token subset rule
  (:mod:`taguru_eval._base.answer_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from taguru_eval._base.answer_tokens import content_tokens
from taguru_eval._base.normalize import normalize_entry
from taguru_eval.options import AnswerMatch
from taguru_eval.tables.shapes import AnswerCheck


@dataclass(frozen=True, slots=True)
class AnswerJudge:
    """One case's answers under the run's match rule, prepared once per case."""

    answers: tuple[str, ...]
    match: AnswerMatch
    _needles: tuple[object, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        fold = _FOLD[self.match]
        object.__setattr__(self, "_needles", tuple(fold(answer) for answer in self.answers))

    def check(self, texts: Sequence[str | None]) -> list[AnswerCheck]:
        """One verdict per answer over the window's texts in rank order
        (``None``: a hit without text of its own)."""
        fold, contains = _FOLD[self.match], _CONTAINS[self.match]
        first: list[int | None] = [None] * len(self._needles)
        missing = set(range(len(self._needles)))
        for rank, text in enumerate(texts, start=1):
            if not missing:
                break
            if text is None:
                continue
            haystack = fold(text)
            for index in sorted(missing):
                if contains(self._needles[index], haystack):
                    first[index] = rank
                    missing.discard(index)
        return [
            AnswerCheck(answer_index=index, found=rank is not None, rank=rank, match=self.match)
            for index, rank in enumerate(first)
        ]


def _substring(needle: object, haystack: object) -> bool:
    assert isinstance(needle, str) and isinstance(haystack, str)
    # An answer that folds to nothing is refused by the loader; "" would match anything.
    return bool(needle) and needle in haystack


def _subset(needle: object, haystack: object) -> bool:
    assert isinstance(needle, frozenset) and isinstance(haystack, frozenset)
    # citenexus passes an empty token set vacuously; here it never counts as found.
    return bool(needle) and needle <= haystack


_FOLD: dict[str, Callable[[str], object]] = {
    "normalized": normalize_entry,
    "tokens": content_tokens,
}
_CONTAINS: dict[str, Callable[[object, object], bool]] = {
    "normalized": _substring,
    "tokens": _subset,
}
