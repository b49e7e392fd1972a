"""How a :class:`~taguru_eval.compare.report.Comparison` shows itself: a one-line
``repr`` and a compact HTML summary for Jupyter (``_repr_html_``).

The summary is the reader's view in small: context, both runs, case counts by
outcome, HEAD's gate verdict, the significance verdicts (``compare
--significance`` at its defaults: one Holm family of the whole run's metrics),
the aggregate metrics that moved with their verdicts and the driver groups
(:mod:`.drivers`) — never the per-case frame itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import polars as pl

from taguru_eval._base.html import pairs_data, render, table_data
from taguru_eval.compare.load import RunView
from taguru_eval.compare.model import NOT_COMPARABLE, UNSTABLE

if TYPE_CHECKING:
    from taguru_eval.compare.significance import Significance

SHOWN_METRICS: Final = 8
SHOWN_GROUPS: Final = 6


def verdict_text(passed: bool | None) -> str:
    """``PASS``, ``FAIL`` or ``report-only`` (no thresholds file was given)."""
    if passed is None:
        return "report-only"
    return "PASS" if passed else "FAIL"


def outcome_text(counts: Mapping[str, int]) -> str:
    """``3 improved, 7 regressed, 0 added, 0 removed, 6 unchanged``."""
    kinds = ("improved", "regressed", "added", "removed", "unchanged")
    # ``unstable`` only when a side was run with --repeat (it is counted apart).
    # ``not_comparable`` only when a side ran a selection (--sample, --filter, …).
    shown = (*kinds, *(kind for kind in (UNSTABLE, NOT_COMPARABLE) if kind in counts))
    return ", ".join(f"{counts.get(kind, 0)} {kind}" for kind in shown)


def tests_text(tests: Significance) -> str:
    """``1 regressed, 8 no significant change (paired, holm over 9 test(s))``."""
    tested = tests.frame.filter(pl.col("n") > 0)
    counts = tested.get_column("verdict").value_counts(sort=True)
    tally = ", ".join(f"{count} {verdict}" for verdict, count in counts.iter_rows())
    family = f"{tests.correction} over {tests.family_size} test(s)"
    return f"{tally or 'nothing to test'} (paired, {family})"


def comparison_repr(base: RunView, head: RunView, counts: Mapping[str, int]) -> str:
    """``<Comparison sake: BASE -> HEAD, 16 -> 16 cases: 3 improved, …>``."""
    return (
        f"<Comparison {head.context or base.context}: {base.path} -> {head.path}, "
        f"{counts.get('cases_base', 0)} -> {counts.get('cases_head', 0)} cases: "
        f"{outcome_text(counts)}>"
    )


def comparison_html(
    base: RunView,
    head: RunView,
    counts: Mapping[str, int],
    moved: pl.DataFrame,
    groups: pl.DataFrame,
    tests: Significance | None = None,
) -> str:
    """The compact HTML summary (see the module docstring); with ``tests`` a
    line of their verdicts and the family they were adjusted in."""
    pairs: list[tuple[str, object]] = [
        ("context", head.context or base.context),
        ("base", f"{base.path} ({base.generated_at})"),
        ("head", f"{head.path} ({head.generated_at})"),
        ("cases", f"{counts.get('cases_base', 0)} → {counts.get('cases_head', 0)}"),
        ("outcome", outcome_text(counts)),
        ("gate (head)", verdict_text(head.gate_passed)),
    ]
    family = ""
    if tests is not None:
        pairs.append(("significance", tests_text(tests)))
        family = f"; verdicts: {tests.correction} over {tests.family_size} test(s), {tests.family}"
    shown_moved = moved.select("metric", "base", "head", "delta", "direction", "verdict")
    return render(
        "display_comparison.html.j2",
        items=pairs_data(pairs),
        moved=table_data(
            shown_moved,
            caption=f"aggregate metrics that moved ({moved.height}){family}",
            limit=SHOWN_METRICS,
        )
        if moved.height
        else None,
        groups=table_data(
            groups.select("kind", "drivers", "cases", "against", "examples"),
            caption="improved and regressed cases by the metrics that drove them",
            limit=SHOWN_GROUPS,
        )
        if groups.height
        else None,
    )
