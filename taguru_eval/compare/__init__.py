"""``compare``: two runs -> a keyed join on case_id -> changes.jsonl (GATE_AND_COMPARE.md §6).

:func:`compare` takes each side as an evaluation.json path, a stored run
directory (``runs/context=<ctx>/run=<id>/``: its per-case and aggregate values
are read from ``cases.parquet``/``metrics.parquet`` and only the head of its
evaluation.json is decoded, :mod:`.parquet`) or an already-loaded
evaluation.json object, and returns a :class:`Comparison` of Polars frames.
The work is split by job: the vocabulary (:mod:`.model`), reading a side
(:mod:`.load`, :mod:`.parquet`), classifying (:mod:`.classify`; a case a
``run --repeat`` side found unstable, :mod:`.stability`), the result
and its renderings (:mod:`.report`), and the paired significance tests over a
result (:func:`significance`, :mod:`.significance`; whether CI fails,
:meth:`Significance.verdict`). ``__all__`` is the public face.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from taguru_eval.artifact.document import WrittenDocument
from taguru_eval.catalog import ANSWERS_METRICS, CATALOG, Catalog
from taguru_eval.compare.classify import compare_views
from taguru_eval.compare.load import RunView, view_from_document
from taguru_eval.compare.multiplicity import Correction
from taguru_eval.compare.parquet import read_side
from taguru_eval.compare.report import Comparison
from taguru_eval.compare.significance import (
    FAIL_ON,
    INCONCLUSIVE,
    NOT_SIGNIFICANT,
    NOT_TESTED,
    PASS,
    SIGNIFICANT_IMPROVEMENT,
    SIGNIFICANT_REGRESSION,
    FailOn,
    PairedCases,
    Significance,
    Verdict,
    significance,
)
from taguru_eval.compare.tags import case_tags, stored_case_tags
from taguru_eval.errors import InputError

__all__ = [
    "FAIL_ON",
    "INCONCLUSIVE",
    "NOT_SIGNIFICANT",
    "NOT_TESTED",
    "PASS",
    "SIGNIFICANT_IMPROVEMENT",
    "SIGNIFICANT_REGRESSION",
    "Comparison",
    "Correction",
    "FailOn",
    "PairedCases",
    "RunView",
    "Side",
    "Significance",
    "Verdict",
    "case_tags",
    "compare",
    "load_side",
    "significance",
    "stored_case_tags",
]

Side = str | os.PathLike[str] | Mapping[str, object]
"""One side of a comparison: a file, a stored run directory, or a parsed document."""


def load_side(
    source: Side,
    side: str,
    *,
    label: str | None = None,
    catalog: Catalog = CATALOG,
    stamp_required: bool = False,
) -> RunView:
    """Load one side; an :class:`InputError` message starts with ``side``
    (``BASE``/``HEAD``) as the CLI prints it. ``stamp_required``: a side
    without ``taguru_evaluation`` is said to miss it, rather than compare's
    pinned ``got 0`` (GATE_AND_COMPARE.md §6.2) — for the readers that are not
    compare."""
    try:
        if isinstance(source, WrittenDocument):  # a run's document: its file, as written
            shown = label if label is not None else f"<{side}>"
            return read_side(
                source.path, label=shown, catalog=catalog, stamp_required=stamp_required
            )
        if isinstance(source, Mapping):
            shown = label if label is not None else f"<{side}>"
            return view_from_document(source, shown, catalog=catalog, stamp_required=stamp_required)
        return read_side(source, label=label, catalog=catalog, stamp_required=stamp_required)
    except InputError as exc:
        raise InputError(
            f"{side} {exc.message}", path=exc.path, line=exc.line, field=exc.field, hint=exc.hint
        ) from None


def compare(
    base: Side,
    head: Side,
    *,
    base_label: str | None = None,
    head_label: str | None = None,
    catalog: Catalog = CATALOG,
    stamp_required: bool = False,
) -> Comparison:
    """Compare two runs; BASE is loaded and validated completely before HEAD.

    Each side is a path to an evaluation.json, a stored run directory (read
    through its Parquet tables when it has them, giving the same result as its
    evaluation.json), or an already-loaded evaluation.json object. ``*_label`` overrides the
    path recorded in the header (default: the path as given, or ``<BASE>`` /
    ``<HEAD>`` for an in-memory document). Raises :class:`InputError` (exit 2
    semantics) for an unreadable, malformed or out-of-range side; a side
    without ``taguru_evaluation`` fails the range check with ``got 0`` (§6.2)
    unless ``stamp_required``, which says it is missing.
    """
    base_view = load_side(
        base, "BASE", label=base_label, catalog=catalog, stamp_required=stamp_required
    )
    head_view = load_side(
        head, "HEAD", label=head_label, catalog=catalog, stamp_required=stamp_required
    )
    both = base_view.answers is not None and head_view.answers is not None
    if both and not set(ANSWERS_METRICS) <= set(catalog):
        # Both runs were given --answers: read their cases again with the answers
        # metrics, so they classify cases too (a run without keeps taguru's nine).
        with_answers = catalog.with_metrics(ANSWERS_METRICS)
        base_view = load_side(
            base, "BASE", label=base_label, catalog=with_answers, stamp_required=stamp_required
        )
        head_view = load_side(
            head, "HEAD", label=head_label, catalog=with_answers, stamp_required=stamp_required
        )
    comparison = compare_views(base_view, head_view)
    if base_view.answers is None and head_view.answers is None:
        return comparison
    block = {"base": base_view.answers, "head": head_view.answers, "classified": both}
    return dataclasses.replace(comparison, answers=block)
