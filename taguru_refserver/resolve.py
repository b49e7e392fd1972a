"""Lexical name resolution over one namespace (HTTP.md §6.6, §9.6).

Two layers: :class:`SpellingIndex` is the reference's entry index (normalized
spellings pointing at integer targets, scored exact/containment/fuzzy), and
:class:`EntryIndex` is one namespace (concepts or labels) on top of it:
canonical names, alias spellings, and candidates named canonically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from taguru_eval._base.normalize import normalize

MatchKind = Literal["exact", "containment", "fuzzy"]
CandidateKind = Literal["exact", "alias", "containment", "fuzzy"]

DEFAULT_DICE_FLOOR = 0.3
MAX_RESOLVE_LIMIT = 1000
GLOSSED_CANDIDATES = 8
LEXICAL_CONFIDENCE = 0.5
# A bigram carried by more than max(#spellings / 20, 64) spellings is boilerplate.
_STOP_GRAM_DIVISOR = 20
_STOP_GRAM_MINIMUM = 64


class AliasConflict(ValueError):
    """An alias write that taguru answers with 409 ``conflict``."""


class UnknownName(KeyError):
    """An alias whose canonical name is not stored (neither a name nor an alias)."""


@dataclass(frozen=True, slots=True)
class Match:
    """The best lexical match of one target: its score and how it matched."""

    score: float
    kind: MatchKind


def _bigrams(text: str) -> frozenset[str]:
    return frozenset(text[i : i + 2] for i in range(len(text) - 1))


@dataclass(slots=True)
class _Spelling:
    normalized: str
    target: int
    bigrams: frozenset[str]


class SpellingIndex:
    """Normalized spellings, each pointing at an integer target (``EntryIndex`` upstream)."""

    def __init__(self) -> None:
        self._spellings: dict[int, _Spelling] = {}
        self._next_id = 0
        # bigram -> ids of the non-empty spellings that contain it
        self._postings: dict[str, set[int]] = {}

    def __len__(self) -> int:
        return len(self._spellings)

    def add(self, spelling: str, target: int) -> int:
        """Index ``spelling`` for ``target``; returns a handle for :meth:`remove`."""
        normalized = normalize(spelling)
        handle = self._next_id
        self._next_id += 1
        entry = _Spelling(normalized, target, _bigrams(normalized))
        self._spellings[handle] = entry
        for gram in entry.bigrams:
            self._postings.setdefault(gram, set()).add(handle)
        return handle

    def remove(self, handle: int) -> None:
        """Forget one spelling added earlier."""
        entry = self._spellings.pop(handle)
        for gram in entry.bigrams:
            holders = self._postings[gram]
            holders.discard(handle)
            if not holders:
                del self._postings[gram]

    def _stop_threshold(self) -> int:
        return max(len(self._spellings) // _STOP_GRAM_DIVISOR, _STOP_GRAM_MINIMUM)

    def match(self, cue: str, dice_floor: float) -> dict[int, Match]:
        """Best match per target for ``cue``: exact/containment first, fuzzy Dice if no exact.

        A later match with an equal score never replaces an earlier one, so the
        first kind seen wins ties (spellings are visited in insertion order).
        """
        needle = normalize(cue)
        if not needle:
            return {}
        best: dict[int, Match] = {}
        matched: set[int] = set()
        any_exact = False
        needle_chars = len(needle)
        for handle, entry in self._spellings.items():
            spelling = entry.normalized
            if not spelling:
                continue
            if spelling == needle:
                candidate = Match(1.0, "exact")
                any_exact = True
            elif needle in spelling or spelling in needle:
                short, long = sorted((needle_chars, len(spelling)))
                candidate = Match(short / long, "containment")
            else:
                continue
            matched.add(handle)
            _keep_best(best, entry.target, candidate)
        if not any_exact:
            self._fuzzy(needle, dice_floor, matched, best)
        return best

    def _fuzzy(
        self, needle: str, dice_floor: float, matched: set[int], best: dict[int, Match]
    ) -> None:
        threshold = self._stop_threshold()
        informative_needle = [
            gram for gram in _bigrams(needle) if len(self._postings.get(gram, ())) <= threshold
        ]
        shared: dict[int, int] = {}
        for gram in informative_needle:
            for handle in self._postings.get(gram, ()):
                if handle not in matched:
                    shared[handle] = shared.get(handle, 0) + 1
        for handle in sorted(shared):  # insertion order, for the first-kind-wins rule
            entry = self._spellings[handle]
            informative_spelling = sum(
                1 for gram in entry.bigrams if len(self._postings[gram]) <= threshold
            )
            dice = 2 * shared[handle] / (len(informative_needle) + informative_spelling)
            if dice >= dice_floor:
                _keep_best(best, entry.target, Match(dice, "fuzzy"))


def _keep_best(best: dict[int, Match], target: int, candidate: Match) -> None:
    current = best.get(target)
    if current is None or candidate.score > current.score:
        best[target] = candidate


@dataclass(frozen=True, slots=True)
class Candidate:
    """One ``TieredResolution`` element, fields in wire key order (HTTP.md §6.6)."""

    name: str
    score: float
    tier: str = "lexical"
    kind: CandidateKind | None = None
    gloss: str | None = None
    types: tuple[str, ...] | None = None

    def to_wire(self) -> dict[str, object]:
        """The JSON object of this candidate; optional keys only when set."""
        wire: dict[str, object] = {"name": self.name, "score": self.score, "tier": self.tier}
        if self.kind is not None:
            wire["kind"] = self.kind
        if self.gloss is not None:
            wire["gloss"] = self.gloss
        if self.types is not None:
            wire["types"] = list(self.types)
        return wire


class EntryIndex:
    """One namespace (concept names or relation labels) with its alias spellings."""

    def __init__(self) -> None:
        self._index = SpellingIndex()
        self._names: list[str] = []  # target id -> canonical name
        self._target_of_name: dict[str, int] = {}
        self._aliases: dict[str, tuple[int, int]] = {}  # alias -> (target, spelling handle)

    def __contains__(self, name: object) -> bool:
        return name in self._target_of_name

    def names(self) -> list[str]:
        """Canonical names in insertion order."""
        return list(self._names)

    def aliases(self) -> dict[str, str]:
        """Alias spelling -> canonical name, sorted by alias."""
        return {alias: self._names[target] for alias, (target, _) in sorted(self._aliases.items())}

    def lookup(self, spelling: str) -> str | None:
        """The canonical name behind an exact (unnormalized) canonical or alias spelling."""
        if spelling in self._target_of_name:
            return spelling
        bound = self._aliases.get(spelling)
        return None if bound is None else self._names[bound[0]]

    def add(self, name: str) -> None:
        """Store a canonical name; a spelling already known (name or alias) is left as is."""
        if name in self._target_of_name or name in self._aliases:
            return
        target = len(self._names)
        self._names.append(name)
        self._target_of_name[name] = target
        self._index.add(name, target)

    def add_alias(self, alias: str, canonical: str) -> None:
        """Bind ``alias`` to ``canonical`` (which may itself be an alias: it resolves through).

        Raises :class:`UnknownName` when ``canonical`` is not stored and
        :class:`AliasConflict` when ``alias`` already names a different record.
        Re-registering the same binding is a successful no-op.
        """
        resolved = self.lookup(canonical)
        if resolved is None:
            raise UnknownName(canonical)
        target = self._target_of_name[resolved]
        existing = self._target_of_name.get(alias)
        if existing is None and alias in self._aliases:
            existing = self._aliases[alias][0]
        if existing is not None:
            if existing != target:
                raise AliasConflict(alias)
            return
        self._aliases[alias] = (target, self._index.add(alias, target))

    def remove_alias(self, alias: str) -> None:
        """Unbind ``alias``; :class:`AliasConflict` for a canonical name or an unknown spelling."""
        bound = self._aliases.pop(alias, None)
        if bound is None:
            raise AliasConflict(alias)
        self._index.remove(bound[1])

    def resolve(
        self, cue: str, limit: int, dice_floor: float = DEFAULT_DICE_FLOOR
    ) -> list[Candidate]:
        """Lexical candidates best first (score desc, name asc), at most ``limit``.

        ``limit`` and ``dice_floor`` are taken as given: the caller applies the
        request defaults and clamps (limit ≤ 1000, floor in [0, 1], NaN → 1.0).
        Glosses are attached by the caller (first 8 candidates).
        """
        if limit <= 0:
            return []
        needle = normalize(cue)
        matches = self._index.match(cue, dice_floor)
        candidates = []
        for target, found in matches.items():
            name = self._names[target]
            kind: CandidateKind = found.kind
            # An exact hit reached through an alias spelling reports kind "alias".
            if kind == "exact" and normalize(name) != needle:
                kind = "alias"
            candidates.append(Candidate(name=name, score=found.score, kind=kind))
        candidates.sort(key=lambda c: (-c.score, c.name))
        return candidates[:limit]
