"""HTML from Jinja2 templates: Polars frames and key/value pairs as plain data, laid out
by the templates in ``taguru_eval/analyst/templates`` (autoescaped, no styling of their own).

Shared by the offline report and the Jupyter displays (``_repr_html_``) of a
run and a comparison, so a value is spelled the same everywhere: null as an
em dash, floats with four decimals, lists comma-joined, booleans yes/no. The
Python side only turns frames into rows (:func:`table_data`); the
``_tables.html.j2`` macros decide how a cell looks, so no markup is ever built
from strings here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import polars as pl

if TYPE_CHECKING:
    import jinja2

TEMPLATES: Final = "analyst/templates"
"""Where the templates live inside the ``taguru_eval`` package (package data)."""

ID_COLUMNS: Final = frozenset({"case_id", "run", "label", "examples", "eval_set"})
"""Columns holding identifiers: one line each, cut with an ellipsis, whole in a tooltip."""

PAGE_ROWS: Final = 10
"""An interactive table shows this many rows a page; one that lists no more stays plain."""


@functools.cache
def environment() -> jinja2.Environment:
    """The one Jinja2 environment (autoescape on, undefined names are errors).

    Imported on first use: ``compare`` and ``run`` import this module for the
    Jupyter displays and should not pay for Jinja2 until something is shown.
    """
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("taguru_eval", TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["breakable"] = _breakable
    return env


def _breakable(name: object) -> Any:
    """A column name that may wrap after ``_`` and ``.`` (``coverage_<wbr>associations``),
    so a table of long snake_case headers fits the page without breaking inside a word."""
    from markupsafe import Markup, escape

    return Markup("<wbr>").join(escape(part) for part in re.split(r"(?<=[_.])", str(name)))


def render(template: str, /, **context: object) -> str:
    """``template`` (a name under :data:`TEMPLATES`) rendered with ``context``."""
    return environment().get_template(template).render(**context)


def _numeric(dtype: pl.DataType) -> bool:
    return dtype.is_numeric() and dtype != pl.Boolean


def table_data(
    frame: pl.DataFrame,
    *,
    caption: str | None = None,
    limit: int = 500,
    more: str | None = None,
    source: Mapping[str, str] | None = None,
    interactive: bool = False,
    tooltips: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A frame as the ``table`` macro lays it out: at most ``limit`` rows, the rest
    counted below it (``more`` replaces the default "… and N more row(s)" note;
    ``source`` — ``{"href": …, "name": …}`` or ``{"text": …}`` — says where every
    row is). ``interactive`` asks the page to make it sortable and filterable
    (DataTables, when the report has it) if it lists more than :data:`PAGE_ROWS`
    rows; the table is complete without it. ``tooltips`` maps a column to the column
    whose value is its cell's tooltip (shown there, not as a column of its own: a run's
    label in the table, its full id under the pointer)."""
    for shown, tip in (tooltips or {}).items():
        frame = frame.with_columns(
            pl.struct(
                pl.col(shown).cast(pl.String).alias("text"), pl.col(tip).alias("title")
            ).alias(shown)
        ).drop(tip)
    columns = [
        {"name": name, "numeric": _numeric(dtype), "id": name in ID_COLUMNS}
        for name, dtype in frame.schema.items()
    ]
    hidden = max(frame.height - limit, 0)
    note = (more or f"… and {hidden} more row(s)") if hidden else None
    return {
        "caption": caption,
        "columns": columns,
        "rows": frame.head(limit).rows(),
        "note": note,
        "source": source if hidden else None,
        "interactive": interactive and min(frame.height, limit) > PAGE_ROWS,
    }


def pairs_data(pairs: Sequence[tuple[str, object]]) -> list[dict[str, object]]:
    """Key/value rows for the ``pairs`` macro."""
    return [{"key": key, "value": value} for key, value in pairs]
