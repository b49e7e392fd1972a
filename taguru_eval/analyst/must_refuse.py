"""The must-refuse population beside the answerable one, for the report and notebooks.

ABSTENTION.md §3.11's trade-off pair: what the refusal rule refuses among
must-refuse questions (``abstention.*``) next to what the same rule, under the
same floor, throws away among answerable ones (``answerability.*``). Every
rate keeps its own numerator and denominator and the two populations are
never pooled. The frames come from a run's ``metrics`` table and its
``refusal_cases`` table (or the artifact's ``abstention`` block, through the
artifact reader), so any run given ``--must-refuse`` can be drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

import altair as alt
import polars as pl

from taguru_eval.analyst.charts import ChartLike
from taguru_eval.artifact.abstention import CLAIM, abstention_warnings
from taguru_eval.score.abstention import effective_floors
from taguru_eval.tables.schemas import TABLE, RunTables

MUST_REFUSE_POPULATION: Final = "must-refuse questions"
ANSWERABLE_POPULATION: Final = "answerable questions"

TRADE_OFF: Final[tuple[tuple[str, str, str], ...]] = (
    (MUST_REFUSE_POPULATION, "abstention.refusal_rate", "refused (every probe abstained)"),
    (MUST_REFUSE_POPULATION, "abstention.passage.refusal_rate", "passage probe abstained"),
    (MUST_REFUSE_POPULATION, "abstention.undetermined_rate", "undetermined"),
    (ANSWERABLE_POPULATION, "answerability.supported_rate", "offered and supported"),
    (ANSWERABLE_POPULATION, "answerability.unsupported_offer_rate", "offered, not supported"),
    (ANSWERABLE_POPULATION, "answerability.false_refusal_rate", "refused (false refusal)"),
    (ANSWERABLE_POPULATION, "answerability.undetermined_rate", "undetermined"),
)
"""(population, metric, what it counts): the rows of the trade-off view, in order."""

TRADE_OFF_SCHEMA: Final = {
    "population": pl.String,
    "metric": pl.String,
    "counts": pl.String,
    "value": pl.Float64,
    "numerator": pl.Int64,
    "n": pl.Int64,
}


@dataclass(frozen=True)
class RunFacts:
    """What a must-refuse run's report states about the claim and its limits."""

    file: str | None
    rule: str | None
    provider_model: str | None
    floors: list[float]
    warnings: list[str]

    def pairs(self) -> list[tuple[str, object]]:
        return [
            ("must-refuse file", self.file),
            ("refusal rule", self.rule),
            ("claim", CLAIM),
            ("provider model", self.provider_model),
            (
                "effective floors",
                [f"{value:g}" for value in self.floors] or "none (no vector lane)",
            ),
            ("floors coherent", len(self.floors) <= 1),
        ]


def run_facts(document: Mapping[str, Any], tables: Mapping[str, pl.DataFrame]) -> RunFacts | None:
    """The rule, file, embedding model, effective floors and warnings of a run
    given --must-refuse, from its ``inputs``/``corpus`` head and its tables (the
    same floors and warnings the artifact's ``abstention`` block records);
    ``None`` for any other run.

    The warnings are the block's own when ``document`` has it (a whole
    evaluation.json, or a stored run's head the report gave the block's
    warnings): only it holds the notes found before the run (a must-refuse
    filter ``--assembly`` cannot send). Without it they are worked out again
    from the tables, without those notes."""
    inputs = document.get("inputs") or {}
    declared = inputs.get("must_refuse") if isinstance(inputs, Mapping) else None
    if not isinstance(declared, Mapping):
        return None
    empty = {name: TABLE[name].empty() for name in ("case_lanes", "refusal_lanes", "refusal_cases")}
    frames = {**empty, **{name: tables[name] for name in empty if name in tables}}
    floors = effective_floors(frames["case_lanes"], frames["refusal_lanes"])
    probes = RunTables.from_frames("report", {"refusal_lanes": frames["refusal_lanes"]})
    rule = declared.get("refusal_rule")
    embeddings = (document.get("corpus") or {}).get("embeddings")
    return RunFacts(
        file=declared.get("path"),
        rule=rule,
        provider_model=embeddings.get("provider_model")
        if isinstance(embeddings, Mapping)
        else None,
        floors=floors,
        warnings=recorded
        if (recorded := _recorded_warnings(document)) is not None
        else abstention_warnings(str(rule), probes, frames["refusal_cases"], floors),
    )


def _recorded_warnings(document: Mapping[str, Any]) -> list[str] | None:
    """The ``abstention`` block's warnings, or ``None`` when the document has no block."""
    block = document.get("abstention")
    recorded = block.get("warnings") if isinstance(block, Mapping) else None
    return [str(text) for text in recorded] if isinstance(recorded, list) else None


def trade_off_frame(metrics: pl.DataFrame) -> pl.DataFrame:
    """The trade-off rows of one run's ``metrics`` table (empty without --must-refuse).

    A metric with no samples keeps its row with a null value, so "nothing to
    measure" stays visible instead of reading as zero.
    """
    wanted = pl.DataFrame(
        [list(row) for row in TRADE_OFF],
        schema={"population": pl.String, "metric": pl.String, "counts": pl.String},
        orient="row",
    )
    present = metrics.select("metric", "value", "numerator", "n")
    if not present.filter(pl.col("metric").is_in(wanted.get_column("metric").implode())).height:
        return pl.DataFrame(schema=TRADE_OFF_SCHEMA)
    return wanted.join(present, on="metric", how="left", maintain_order="left").cast(
        TRADE_OFF_SCHEMA  # type: ignore[arg-type]
    )


def verdict_counts(refusal_cases: pl.DataFrame) -> pl.DataFrame:
    """Must-refuse cases counted by ``kind`` and ``verdict`` (the kinds are different animals)."""
    return (
        refusal_cases.group_by("kind", "verdict")
        .len("cases")
        .sort("kind", "verdict")
        .with_columns(pl.col("cases").cast(pl.Int64))
    )


def verdict_rows(refusal_cases: pl.DataFrame) -> pl.DataFrame:
    """One row per must-refuse case: its verdict, why, and each probe's own verdict."""
    return refusal_cases.sort("case_index").select(
        "case_id",
        "kind",
        "verdict",
        "reason",
        "passage_verdict",
        "hits_served",
        "vector_hits",
        "structural_verdict",
        "cues_surfaced",
    )


def trade_off_chart(frame: pl.DataFrame) -> ChartLike:
    """The two populations side by side: one bar per rate, labelled with its
    numerator and denominator; a rate with no samples shows as ``n/a``."""
    rows = frame.with_columns(
        pl.when(pl.col("n") > 0)
        .then(pl.format("{} / {}", pl.col("numerator"), pl.col("n")))
        .otherwise(pl.lit("n/a (n=0)"))
        .alias("label"),
        pl.col("value").fill_null(0.0).alias("shown"),
    )
    order = rows.get_column("counts").to_list()
    base = alt.Chart().encode(
        y=alt.Y("counts:N", sort=order, title=None),
        tooltip=[
            "population:N",
            "metric:N",
            alt.Tooltip("value:Q", format=".3f"),
            "numerator:Q",
            "n:Q",
        ],
    )
    bars = base.mark_bar().encode(
        x=alt.X("shown:Q", title="share of its own population", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("population:N", title=None),
    )
    labels = base.mark_text(align="left", dx=4).encode(x="shown:Q", text="label:N")
    return cast(
        ChartLike,
        alt.layer(bars, labels, data=rows)
        .facet(row=alt.Row("population:N", title=None))
        .resolve_scale(y="independent")
        .properties(title="must-refuse beside answerable (same rule, same floor)")
        .properties(name="must_refuse"),
    )
