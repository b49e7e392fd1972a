"""A run in the formats IR tools read: a TREC run file and TREC qrels.

* **run file** (trec_eval, ir_measures, ranx): ``qid Q0 docno rank score tag``,
  one line per served hit, from the run's ``hits`` table. ``qid`` is the
  case_id, ``docno`` the passage id ``source#paragraph``, ``rank`` 1-based.
  trec_eval re-sorts a query's documents by score, and a server's scores can
  tie, so the ``score`` column is the rank order itself (hits of the case −
  0-based rank): every tool then sees the hits in the order the server
  served them. The server's own score stays in ``hits.parquet``.
* **qrels**: ``qid 0 docno relevance``, from the eval set's expected sources:
  every listed paragraph of an entry gets the entry's graded relevance
  (``relevance: 0`` is written too: judged, not relevant); a passage listed by
  two entries of a case keeps the higher grade. An entry without paragraphs
  ("any paragraph of this source") names no passage, so it has no qrels line;
  :func:`wildcard_expectations` counts them.

A stored run does not hold the eval set's expectations, so the qrels come
from an eval.jsonl (the command line's ``--eval FILE``, else the file the run
recorded as ``inputs.eval.path``). Identifiers are written with ``%``,
whitespace and control characters percent-encoded (``%25``, ``%20``, ``%00``,
``%1B``, ``%C2%85``, …) in both files, so a case id or a source path with a
space stays one field, no raw control byte is written, and the two files still
match.

For Python tools, :func:`qrels_dict` and :func:`run_dict` give the same data
as ``{qid: {docno: value}}`` mappings, the form ir_measures and ranx accept.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from taguru_eval.tables.schemas import POPULATION_EVAL

QREL_ITERATION: Final = "0"
RUN_Q0: Final = "Q0"

_ENCODED: Final = {"%": "%25", " ": "%20", "\t": "%09", "\n": "%0A", "\r": "%0D", "\f": "%0C"}
"""Characters that would split or break a whitespace-separated field, and their codes."""


def _field(expr: pl.Expr) -> pl.Expr:
    """An identifier as one whitespace-free field (``%`` first, so codes stay unambiguous)."""
    for raw, code in _ENCODED.items():
        expr = expr.str.replace_all(raw, code, literal=True)
    return expr.str.replace_all(r"\s", "%20")


def passage_id(source: pl.Expr, paragraph: pl.Expr) -> pl.Expr:
    """``source#paragraph``, the passage id both files use."""
    return pl.concat_str(source, pl.lit("#"), paragraph.cast(pl.String))


def run_frame(hits: pl.DataFrame) -> pl.DataFrame:
    """``qid, docno, rank, score`` per served passage, cases in order, hits by rank.

    Only eval.jsonl cases are queries: a must-refuse probe's hits (population
    ``must_refuse``) share the table but have no qrels.
    """
    if "population" in hits.columns:
        hits = hits.filter(pl.col("population").fill_null(POPULATION_EVAL) == POPULATION_EVAL)
    ordered = hits.filter(pl.col("source").is_not_null() & pl.col("paragraph").is_not_null()).sort(
        "case_index", "rank"
    )
    served = pl.col("served")
    return (
        ordered.with_columns(pl.len().over("case_index").alias("served"))
        .select(
            "case_index",
            pl.col("case_id").alias("qid"),
            passage_id(pl.col("source"), pl.col("paragraph")).alias("docno"),
            (pl.col("rank").cast(pl.Int64) + 1).alias("rank"),
            (served - pl.col("rank")).cast(pl.Float64).alias("score"),
        )
        # A passage served twice to one case counts at its best rank (TREC has one line).
        .unique(["case_index", "docno"], keep="first", maintain_order=True)
        .drop("case_index")
    )


def qrels_frame(expected: pl.DataFrame) -> pl.DataFrame:
    """``qid, docno, relevance`` per judged passage (an eval set's ``expected`` frame)."""
    sources = expected.filter((pl.col("kind") == "source") & pl.col("paragraph").is_not_null())
    return (
        sources.select(
            "case_index",
            pl.col("case_id").alias("qid"),
            passage_id(pl.col("source"), pl.col("paragraph")).alias("docno"),
            pl.col("relevance").cast(pl.Int64),
        )
        .group_by("case_index", "qid", "docno", maintain_order=True)
        .agg(pl.col("relevance").max())
        .sort("case_index", maintain_order=True)
        .select("qid", "docno", "relevance")
    )


def wildcard_expectations(expected: pl.DataFrame) -> int:
    """Expected-source entries naming no paragraph: they have no qrels line."""
    return expected.filter((pl.col("kind") == "source") & pl.col("paragraph").is_null()).height


_CONTROLS: Final = {
    code: "".join(f"%{byte:02X}" for byte in chr(code).encode())
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))
    if chr(code) != "\n"
}
"""The other control characters (C0, DEL, C1) and their UTF-8 percent codes. A
line feed inside an identifier is already ``%0A`` (:data:`_ENCODED`), so every
one left in the text is a line's end."""


def _lines(frame: pl.DataFrame, parts: list[pl.Expr]) -> str:
    if frame.height == 0:
        return ""
    text = frame.select(pl.concat_str(parts, separator=" ").str.join("\n")).item()
    assert isinstance(text, str)
    # A NUL or an escape sequence in an id would reach a terminal or a C reader
    # raw; they are encoded once, over the whole file (one C-level pass).
    return text.translate(_CONTROLS) + "\n"


def trec_run(hits: pl.DataFrame, tag: str) -> str:
    """The TREC run file of a run's ``hits`` table, tagged ``tag``."""
    frame = run_frame(hits)
    return _lines(
        frame,
        [
            _field(pl.col("qid")),
            pl.lit(RUN_Q0),
            _field(pl.col("docno")),
            pl.col("rank").cast(pl.String),
            pl.col("score").cast(pl.Int64).cast(pl.String),
            _field(pl.lit(tag)),
        ],
    )


def trec_qrels(expected: pl.DataFrame) -> str:
    """The TREC qrels of an eval set's ``expected`` frame."""
    frame = qrels_frame(expected)
    return _lines(
        frame,
        [
            _field(pl.col("qid")),
            pl.lit(QREL_ITERATION),
            _field(pl.col("docno")),
            pl.col("relevance").cast(pl.String),
        ],
    )


def qrels_dict(expected: pl.DataFrame) -> dict[str, dict[str, int]]:
    """``{case_id: {source#paragraph: relevance}}`` (ir_measures / ranx qrels)."""
    out: dict[str, dict[str, int]] = {}
    for qid, docno, relevance in qrels_frame(expected).iter_rows():
        out.setdefault(qid, {})[docno] = relevance
    return out


def run_dict(hits: pl.DataFrame) -> dict[str, dict[str, float]]:
    """``{case_id: {source#paragraph: score}}`` (ir_measures / ranx run), scores as in
    :func:`trec_run`."""
    out: dict[str, dict[str, float]] = {}
    for qid, docno, _rank, score in run_frame(hits).iter_rows():
        out.setdefault(qid, {})[docno] = score
    return out
