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

Matcher = Callable[[str], set[int]]
"""The indexes of a case's answers that one hit's text holds."""


def _substrings(answers: Sequence[str]) -> Matcher:
    needles = [normalize_entry(answer) for answer in answers]

    def found(text: str) -> set[int]:
        haystack = normalize_entry(text)
        # An answer that folds to nothing is refused by the loader; "" would match anything.
        return {index for index, needle in enumerate(needles) if needle and needle in haystack}

    return found


def _token_subsets(answers: Sequence[str]) -> Matcher:
    needles = [content_tokens(answer) for answer in answers]

    def found(text: str) -> set[int]:
        haystack = content_tokens(text)
        # citenexus passes an empty token set vacuously; here it is never found.
        return {index for index, needle in enumerate(needles) if needle and needle <= haystack}

    return found


_MATCHERS: dict[str, Callable[[Sequence[str]], Matcher]] = {
    "normalized": _substrings,
    "tokens": _token_subsets,
}


@dataclass(frozen=True, slots=True)
class AnswerJudge:
    """One case's answers under the run's match rule, prepared once per case."""

    answers: tuple[str, ...]
    match: AnswerMatch
    _found: Matcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_found", _MATCHERS[self.match](self.answers))

    def check(self, texts: Sequence[str | None]) -> list[AnswerCheck]:
        """One verdict per answer over the window's texts in rank order
        (``None``: a hit without text of its own)."""
        first: dict[int, int] = {}
        for rank, text in enumerate(texts, start=1):
            if len(first) == len(self.answers):
                break
            if text is not None:
                for index in self._found(text):
                    first.setdefault(index, rank)
        return [
            AnswerCheck(
                answer_index=index, found=index in first, rank=first.get(index), match=self.match
            )
            for index in range(len(self.answers))
        ]
