"""Small HTML tables from Polars frames and key/value pairs (escaped, no styling of their own).

Shared by the offline report and the Jupyter displays (``_repr_html_``) of a
run and a comparison, so a value is spelled the same everywhere: null as an
em dash, floats with four decimals, lists comma-joined.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import polars as pl


def cell_html(value: object) -> str:
    """One ``<td>`` for a frame value."""
    if value is None:
        return '<td class="null">—</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, float):
        return f'<td class="num">{value:.4f}</td>'
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    if isinstance(value, list):
        return f"<td>{html.escape(', '.join(str(item) for item in value))}</td>"
    return f"<td>{html.escape(str(value))}</td>"


def table_html(
    frame: pl.DataFrame,
    *,
    caption: str | None = None,
    limit: int = 500,
    more: str | None = None,
) -> str:
    """A frame as an HTML table: at most ``limit`` rows, the rest counted below it
    (``more`` replaces the default "… and N more row(s)" note; it is HTML)."""
    head = "".join(f"<th>{html.escape(name)}</th>" for name in frame.columns)
    body = "".join(
        "<tr>" + "".join(cell_html(value) for value in row) + "</tr>"
        for row in frame.head(limit).iter_rows()
    )
    note = ""
    if frame.height > limit:
        note = more or f"… and {frame.height - limit} more row(s)"
        note = f'<p class="note">{note}</p>'
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (
        f'<div class="scroll"><table>{title}<thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>{note}"
    )


def pairs_html(pairs: Sequence[tuple[str, object]]) -> str:
    """Key/value rows (``<th>`` key, ``<td>`` value)."""
    rows = "".join(
        f"<tr><th>{html.escape(key)}</th>{cell_html(value)}</tr>" for key, value in pairs
    )
    return f'<table class="pairs"><tbody>{rows}</tbody></table>'
