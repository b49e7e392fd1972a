"""compare's vocabulary: the case kinds, the tolerance, the per-metric column names."""

from __future__ import annotations

from typing import Final

from taguru_eval.catalog import CASE_VALUE_EPSILON

EPSILON: Final = CASE_VALUE_EPSILON
"""Absolute tolerance: ``|head - base| <= 1e-9`` is unchanged (§6.4)."""

KINDS: Final = ("improved", "regressed", "added", "removed", "unchanged")

UNSTABLE: Final = "unstable"
"""The additive kind of a case matched on both sides and unstable on either
(``run --repeat``): never classified improved or regressed."""

IMPROVED: Final = "improved"

REGRESSED: Final = "regressed"

NOT_COMPARABLE: Final = "not_comparable"


def base_column(metric: str) -> str:
    """Column of the BASE value of ``metric`` in :attr:`Comparison.cases`."""
    return f"{metric}.base"


def head_column(metric: str) -> str:
    """Column of the HEAD value of ``metric``."""
    return f"{metric}.head"


def delta_column(metric: str) -> str:
    """Column of ``head - base`` (null unless both sides have a value)."""
    return f"{metric}.delta"


def direction_column(metric: str) -> str:
    """Column of the metric's direction: ``improved``, ``regressed``,
    ``not_comparable`` (added/removed case) or null (unchanged / not recorded)."""
    return f"{metric}.direction"
