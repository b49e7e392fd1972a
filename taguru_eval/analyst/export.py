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

**Wildcards as taguru counts them** (:func:`taguru_frames`, ``export --wildcards
taguru``): the files above judge passages, taguru judges expectations (EVALUATE.md
§4.2: one item per expected-source entry, credited once, at its first satisfying
rank). This form writes taguru's crediting itself, so the TREC tools' uncut
``recall``/``recip_rank``/``ndcg`` are taguru's recall@k, MRR and nDCG:

* **qrels**: one line per judged entry (``relevance >= 1``) of each case taguru
  scores (passage lane searched), docno its *expectation id* —
  ``source#3`` for one paragraph, ``source#*`` for any paragraph,
  ``source#2+5`` for a list (sorted, distinct); a second entry with the same id
  in the case gets ``~2``, a third ``~3`` — relevance its grade.
  ``relevance: 0`` entries are left out: taguru does not judge them.
* **run**: one line per served hit, at its rank. The hit that first satisfies an
  entry (:func:`taguru_eval.score.match.judged_items`, the scorer's own match) is
  written as that entry's id; any other hit as its passage id, or
  ``source#paragraph@rank`` (1-based) where that id is taken (an entry's id,
  or the same passage served earlier in the case). So a later hit satisfying a
  credited entry is a distinct, unjudged document.
* A hit that is the first to satisfy **two or more** entries cannot be written
  as TREC: a position holds one document, while taguru credits every such entry
  at that rank. Its further entries (highest grade first) get their own lines
  right after it, so recall and MRR still agree, and nDCG on that case is lower
  than taguru's (each further entry, and every hit after it, one rank later; nor
  is there taguru's clamp at 1.0). :attr:`TrecFrames.shared_cases` counts them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import polars as pl

from taguru_eval.errors import InputError
from taguru_eval.score.match import judged_items
from taguru_eval.score.recall import searched_cases
from taguru_eval.tables.schemas import POPULATION_EVAL, RunTables

QREL_ITERATION: Final = "0"
RUN_Q0: Final = "Q0"

WILDCARDS_DROP: Final = "drop"
"""Passages judged as eval.jsonl lists them; an entry without paragraphs has no line."""
WILDCARDS_TAGURU: Final = "taguru"
"""Expectations judged and credited as taguru scores them (:func:`taguru_frames`)."""
WILDCARD_MODES: Final = (WILDCARDS_DROP, WILDCARDS_TAGURU)

_ENCODED: Final = {"%": "%25", " ": "%20", "\t": "%09", "\n": "%0A", "\r": "%0D", "\f": "%0C"}
"""Characters that would split or break a whitespace-separated field, and their codes."""


def eval_source(doc: Mapping[str, Any], eval_path: str | os.PathLike[str] | None) -> str:
    """Where a run's qrels come from: ``eval_path`` when given, else the eval.jsonl
    the run recorded (``inputs.eval.path`` of its document ``doc``) when that file
    exists here. Raises :class:`InputError` naming both when neither does."""
    if eval_path is not None:
        return os.fspath(eval_path)
    inputs = doc.get("inputs") or {}
    recorded = (inputs.get("eval") or {}).get("path") if isinstance(inputs, dict) else None
    if isinstance(recorded, str) and recorded and Path(recorded).is_file():
        return recorded
    shown = f"'{recorded}'" if isinstance(recorded, str) and recorded else "none"
    raise InputError(
        f"no eval set for the qrels: pass --eval FILE (the run recorded inputs.eval.path "
        f"{shown}, which is not a readable file here)"
    )


def _field(expr: pl.Expr) -> pl.Expr:
    """An identifier as one whitespace-free field (``%`` first, so codes stay unambiguous)."""
    for raw, code in _ENCODED.items():
        expr = expr.str.replace_all(raw, code, literal=True)
    return expr.str.replace_all(r"\s", "%20")


def passage_id(source: pl.Expr, paragraph: pl.Expr) -> pl.Expr:
    """``source#paragraph``, the passage id both files use."""
    return pl.concat_str(source, pl.lit("#"), paragraph.cast(pl.String))


def _eval_hits(hits: pl.DataFrame) -> pl.DataFrame:
    """The served passages of eval.jsonl cases, by case and rank.

    Only eval.jsonl cases are queries: a must-refuse probe's hits (population
    ``must_refuse``) share the table but have no qrels.
    """
    if "population" in hits.columns:
        hits = hits.filter(pl.col("population").fill_null(POPULATION_EVAL) == POPULATION_EVAL)
    return hits.filter(pl.col("source").is_not_null() & pl.col("paragraph").is_not_null()).sort(
        "case_index", "rank"
    )


def run_frame(hits: pl.DataFrame) -> pl.DataFrame:
    """``qid, docno, rank, score`` per served passage, cases in order, hits by rank."""
    ordered = _eval_hits(hits)
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


@dataclass(frozen=True)
class TrecFrames:
    """A run's qrels and run frames (``qid, docno, relevance`` and ``qid, docno,
    rank, score``), and the cases where one hit credits several expectations."""

    qrels: pl.DataFrame
    run: pl.DataFrame
    shared_cases: tuple[str, ...] = ()
    """The case_ids (run order) where one hit is the first to satisfy two or more
    judged entries: the one shape TREC cannot hold (nDCG differs there; recall and
    MRR agree)."""
    shared_lines: int = 0
    """Run lines that are no hit: the further entries of those hits."""


def drop_frames(expected: pl.DataFrame, hits: pl.DataFrame) -> TrecFrames:
    """The default export's frames: passages judged, wildcards left out."""
    return TrecFrames(qrels_frame(expected), run_frame(hits))


def _expectation_ids(judged: pl.DataFrame) -> pl.DataFrame:
    """``case_index, entry_index, docno`` per judged entry (see the module docstring)."""
    entries = judged.group_by("case_index", "entry_index", maintain_order=True).agg(
        pl.col("source").first(),
        pl.col("paragraph").is_null().any().alias("wildcard"),
        pl.col("paragraph").drop_nulls().unique().sort().cast(pl.String).str.join("+"),
    )
    base = pl.concat_str(
        pl.col("source"),
        pl.lit("#"),
        pl.when(pl.col("wildcard")).then(pl.lit("*")).otherwise(pl.col("paragraph")),
    )
    # Duplicate entries are separate items (§4.2), so each needs its own document.
    seen = pl.int_range(pl.len()).over("case_index", "docno")
    return (
        entries.with_columns(base.alias("docno"))
        .with_columns(
            pl.when(seen == 0)
            .then(pl.col("docno"))
            .otherwise(pl.concat_str(pl.col("docno"), pl.lit("~"), (seen + 1).cast(pl.String)))
        )
        .select("case_index", "entry_index", "docno")
    )


def taguru_frames(expected: pl.DataFrame, tables: RunTables) -> TrecFrames:
    """Qrels and run whose uncut recall, reciprocal rank and nDCG are taguru's
    recall@k, MRR and nDCG for every case but :attr:`TrecFrames.shared_cases`.

    ``expected`` is the eval set's frame, ``tables`` the run's; cases are
    matched by ``case_id``, so the eval set need not list them in the run's order.
    """
    searched = searched_cases(tables).join(
        tables.case_lanes.select("case_index", "case_id"),
        on="case_index",
        how="left",
        maintain_order="left",
    )
    # The run's case numbers, so the scorer's own match pairs the right hits.
    judged = (
        expected.filter((pl.col("kind") == "source") & (pl.col("relevance") >= 1))
        .drop("case_index")
        .join(searched, on="case_id", how="inner", maintain_order="left")
    )
    hits = _eval_hits(tables.hits)
    items = judged_items(judged, searched.select("case_index"), hits).join(
        _expectation_ids(judged),
        on=["case_index", "entry_index"],
        how="left",
        maintain_order="left",
    )
    names = searched.select("case_index", pl.col("case_id").alias("qid"))
    qrels = items.join(names, on="case_index", how="left", maintain_order="left").select(
        "qid", "docno", pl.col("relevance").cast(pl.Int64)
    )
    # Each entry once, at its first satisfying rank; several on one hit highest grade first.
    credited = (
        items.filter(pl.col("first_rank").is_not_null())
        .sort(
            "case_index",
            "first_rank",
            pl.col("relevance"),
            "entry_index",
            descending=[False, False, True, False],
        )
        .with_columns(pl.int_range(pl.len()).over("case_index", "first_rank").alias("slot"))
        .select("case_index", pl.col("first_rank").alias("rank"), "slot", "docno")
    )
    passage = passage_id(pl.col("source"), pl.col("paragraph"))
    # Each hit keeps its rank; the one crediting an entry is written as that entry.
    served = hits.select("case_index", "case_id", "rank", passage.alias("passage")).join(
        credited.filter(pl.col("slot") == 0).drop("slot"),
        on=["case_index", "rank"],
        how="left",
        maintain_order="left",
    )
    # A query lists a document once, and a hit that credits nothing must not pass
    # for an entry: a passage id an entry has, or the case served before, is renamed.
    taken = items.select(
        "case_index", pl.col("docno").alias("passage"), pl.lit(True).alias("taken")
    )
    uncredited = (
        served.filter(pl.col("docno").is_null())
        .join(taken.unique(), on=["case_index", "passage"], how="left", maintain_order="left")
        .with_columns(
            (
                pl.col("taken").fill_null(False)
                | ~pl.col("passage").is_first_distinct().over("case_index")
            ).alias("taken")
        )
        .select(
            "case_index",
            "rank",
            pl.when(pl.col("taken"))
            .then(pl.concat_str("passage", pl.lit("@"), (pl.col("rank") + 1).cast(pl.String)))
            .otherwise(pl.col("passage"))
            .alias("renamed"),
        )
    )
    lines = pl.concat(
        [
            served.join(
                uncredited, on=["case_index", "rank"], how="left", maintain_order="left"
            ).select(
                "case_index",
                "rank",
                pl.lit(0, dtype=pl.Int64).alias("slot"),
                pl.coalesce("docno", "renamed").alias("docno"),
            ),
            credited.filter(pl.col("slot") > 0).with_columns(pl.col("slot").cast(pl.Int64)),
        ],
        how="vertical_relaxed",
    ).sort("case_index", "rank", "slot")
    # Ranks and scores by line: trec_eval re-sorts by score, so it is the line order.
    position = pl.int_range(pl.len()).over("case_index")
    run = lines.join(
        hits.select("case_index", "case_id").unique("case_index"),
        on="case_index",
        how="left",
        maintain_order="left",
    ).select(
        pl.col("case_id").alias("qid"),
        "docno",
        (position + 1).cast(pl.Int64).alias("rank"),
        (pl.len().over("case_index") - position).cast(pl.Float64).alias("score"),
    )
    shared = (
        credited.filter(pl.col("slot") > 0)
        .select(pl.col("case_index").unique(maintain_order=True))
        .join(names, on="case_index", how="left", maintain_order="left")
        .get_column("qid")
    )
    extra = credited.filter(pl.col("slot") > 0).height
    return TrecFrames(qrels, run, tuple(shared.to_list()), extra)


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
    return run_text(run_frame(hits), tag)


def run_text(frame: pl.DataFrame, tag: str) -> str:
    """The TREC run file of a ``qid, docno, rank, score`` frame, tagged ``tag``."""
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
    return qrels_text(qrels_frame(expected))


def qrels_text(frame: pl.DataFrame) -> str:
    """The TREC qrels of a ``qid, docno, relevance`` frame."""
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
    return qrels_mapping(qrels_frame(expected))


def run_dict(hits: pl.DataFrame) -> dict[str, dict[str, float]]:
    """``{case_id: {source#paragraph: score}}`` (ir_measures / ranx run), scores as in
    :func:`trec_run`."""
    return run_mapping(run_frame(hits))


def qrels_mapping(frame: pl.DataFrame) -> dict[str, dict[str, int]]:
    """``{qid: {docno: relevance}}`` of a qrels frame."""
    out: dict[str, dict[str, int]] = {}
    for qid, docno, relevance in frame.iter_rows():
        out.setdefault(qid, {})[docno] = relevance
    return out


def run_mapping(frame: pl.DataFrame) -> dict[str, dict[str, float]]:
    """``{qid: {docno: score}}`` of a run frame."""
    out: dict[str, dict[str, float]] = {}
    for qid, docno, _rank, score in frame.iter_rows():
        out.setdefault(qid, {})[docno] = score
    return out


def trec_frames(expected: pl.DataFrame, tables: RunTables, wildcards: str) -> TrecFrames:
    """The frames of ``wildcards`` mode (one of :data:`WILDCARD_MODES`)."""
    if wildcards == WILDCARDS_TAGURU:
        return taguru_frames(expected, tables)
    if wildcards == WILDCARDS_DROP:
        return drop_frames(expected, tables.hits)
    raise ValueError(f"wildcards must be one of {', '.join(WILDCARD_MODES)}, got {wildcards!r}")
