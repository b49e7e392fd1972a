"""The run's console summary (EVALUATE.md §3.9, §7.5), read from the finished run.

The lines are read from the scorer's frames and metrics and the artifact;
nothing here computes a metric."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import polars as pl

from taguru_eval._base.text import one_line
from taguru_eval.catalog import STABILITY_DIFFERS, STABILITY_UNSTABLE, UNSTABLE_RATE
from taguru_eval.errors import PREFIX
from taguru_eval.gate import UNSTABLE_CORPUS_WARNING_LINE
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.score.aggregate import Scores, lane_cross_line
from taguru_eval.score.blocks import citation_is_valid
from taguru_eval.tables.schemas import RunTables


def _mean(metric: Mapping[str, Any]) -> float:
    value = metric.get("mean")
    return float(value) if isinstance(value, int | float) else 0.0


def summary_lines(
    prepared: PreparedRun, doc: Mapping[str, Any], scores: Scores, tables: RunTables
) -> list[str]:
    """The §3.9 stdout summary up to (not including) the ``wrote`` line."""
    context = prepared.options.context
    metrics = scores.metrics
    cases = scores.cases
    total = cases.height
    failed = cases.filter(pl.col("passage_outcome") == "failed").height
    structural = cases.filter(pl.col("structural_ran")).height
    positions = tables.probes.select(
        pl.concat_list([f"{p}_outcome" for p in ("subject", "label", "object")]).alias("outcome")
    ).explode("outcome")
    ambiguous = positions.filter(pl.col("outcome") == "ambiguous").height
    not_found = positions.filter(pl.col("outcome") == "not_found").height
    lines = [
        f"taguru evaluate: {prepared.masked_url} / context '{context}'",
        f"  {total} case(s) — passage: {total - failed} ok, {failed} failed; structural lane "
        f"ran on {structural} case(s) ({ambiguous} ambiguous, {not_found} not-found position(s))",
        *failed_case_lines(tables),
    ]
    if prepared.selection is not None:
        lines.append(selection_line(prepared.selection))
    recall = metrics["recall.recall_at_k"]
    if recall["n"]:
        lines.append(
            f"  recall over {recall['n']} case(s): mean recall@k {_mean(recall):.3f}, "
            f"mean MRR {_mean(metrics['recall.mrr']):.3f}, "
            f"mean nDCG {_mean(metrics['recall.ndcg']):.3f}"
        )
    cross = lane_cross_line(metrics)
    if cross is not None:
        lines.append(cross)
    citations = metrics["citations.recall"]
    if citations["n"]:
        lines.append(
            f"  citations over {citations['n']} case(s): mean recall {_mean(citations):.3f}, "
            f"mean locator validity {_mean(metrics['citations.locator_validity']):.3f}"
        )
        invalid = tables.citation_checks.filter(~citation_is_valid()).sort(
            "case_index", "citation_index"
        )
        for source, paragraph in invalid.select("source", "paragraph").head(3).iter_rows():
            # Interpolated raw, as the reference's format string does (no JSON escaping).
            body = f'{{"source": "{source}", "paragraph": {paragraph}}}'
            lines.append(
                f"    invalid locator — reproduce with: POST /contexts/{context}/citations {body}"
            )
        if invalid.height > 3:
            lines.append(f"    ... and {invalid.height - 3} more invalid locator(s)")
    lines.extend(answers_lines(doc, metrics))
    lines.extend(stability_lines(doc, scores))
    lines.extend(_budget_lines(prepared, metrics))
    if not doc["corpus"]["stable"]:
        lines.append(UNSTABLE_CORPUS_WARNING_LINE)
    return lines


def selection_line(selection: Mapping[str, Any]) -> str:
    """With a selection flag: how many of the file's cases ran, and which flags chose them."""
    chosen = [
        f"{flag} {', '.join(selection[key])}"
        for key, flag in (("filter", "--filter"), ("tag", "--tag"))
        if key in selection
    ]
    if "failing" in selection:
        failing = selection["failing"]
        chosen.append(f"--failing {failing['path']} ({failing['cases']} {failing['kind']})")
    if "sample" in selection:
        sample = selection["sample"]
        chosen.append(
            f"--sample {sample['size']} (seed {sample['seed']}, {sample['strata']} tag strata)"
        )
    return one_line(
        f"  selection: {selection['cases']} of {selection['eval_cases']} case(s) ran "
        f"({'; '.join(chosen)}); the metrics and the gate are over these cases only"
    )


FAILED_CASES_LISTED: Final = 3
"""How many failed cases of each lane the summary names before counting the rest."""

FAILURE_FIELDS: Final = (
    "cases[].passage.message (outcome: failed)",
    "cases[].structural.associations[].query.message (outcome: errored)",
    "cases[].citations.checks[].message (outcome: unresolved)",
    "cases[].evidence.message (outcome: failed)",
)
"""Where evaluation.json keeps each failure the summary can only count (ERRATA row 21)."""


def wrote_line(out: str) -> str:
    """The run's ``wrote`` line: the artifact, and where its per-case failures live."""
    return f"  wrote {out} — per-case failures under {', '.join(FAILURE_FIELDS)}"


def failed_case_lines(tables: RunTables) -> list[str]:
    """ERRATA row 20: each eval case's failures by lane (passage, structural query,
    citation, evidence), in case order then probe/check order, at most
    :data:`FAILED_CASES_LISTED` per lane before a ``... and N more`` line.

    Read from the eval population's tables only (taguru walks ``cases[]``); the
    messages are the recorded, already truncated ones. Under ``--assembly`` a
    failed evidence call is a failed passage lane too, so it is listed twice, as
    taguru lists it."""
    case = pl.format("case '{}': ", pl.col("case_id"))
    lanes = tables.case_lanes
    found = pl.concat(
        [
            lanes.filter(pl.col("passage_outcome") == "failed").select(
                pl.lit(0).alias("lane"),
                "case_index",
                pl.lit(0).alias("item"),
                pl.concat_str(case, pl.col("passage_message").fill_null("")).alias("entry"),
            ),
            tables.probes.filter(pl.col("query_outcome") == "errored").select(
                pl.lit(1).alias("lane"),
                "case_index",
                pl.col("association_index").cast(pl.Int64).alias("item"),
                pl.concat_str(
                    case,
                    pl.format("associations[{}]: ", pl.col("association_index")),
                    pl.col("query_message").fill_null(""),
                ).alias("entry"),
            ),
            tables.citation_checks.filter(pl.col("outcome") == "unresolved").select(
                pl.lit(2).alias("lane"),
                "case_index",
                pl.col("citation_index").cast(pl.Int64).alias("item"),
                pl.concat_str(
                    case,
                    pl.format(
                        "{} paragraph {}: {}: ",
                        "source",
                        "paragraph",
                        pl.col("code").fill_null("no code"),
                    ),
                    pl.col("message").fill_null(""),
                ).alias("entry"),
            ),
            lanes.filter(pl.col("evidence_outcome") == "failed").select(
                pl.lit(3).alias("lane"),
                "case_index",
                pl.lit(0).alias("item"),
                pl.concat_str(case, pl.col("evidence_message").fill_null("")).alias("entry"),
            ),
        ],
        how="vertical_relaxed",
    ).sort("lane", "case_index", "item")
    by_lane = found.group_by("lane").agg("entry")
    listed = dict(zip(by_lane.get_column("lane"), by_lane.get_column("entry"), strict=True))
    return [
        line
        for lane, name in enumerate(_LANE_NAMES)
        if lane in listed
        for line in capped_lines(name, listed[lane].to_list(), "every one is in evaluation.json")
    ]


_LANE_NAMES: Final = ("passage", "structural query", "citation", "evidence")


def capped_lines(name: str, entries: Sequence[str], where: str) -> list[str]:
    """``    {name} failed — {entry}`` for the first :data:`FAILED_CASES_LISTED`
    entries, then one line counting the rest (``where`` says where they all are)."""
    shown = [f"    {name} failed — {entry}" for entry in entries[:FAILED_CASES_LISTED]]
    rest = len(entries) - FAILED_CASES_LISTED
    if rest > 0:
        shown.append(f"    ... and {rest} more {name} failure(s) ({where})")
    return shown


def answers_lines(doc: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[str]:
    """With ``--answers``: one line of the answers figures with their denominators."""
    declared = doc.get("inputs", {}).get("answers")
    hit = metrics.get("answers.hit_at_k")
    if not isinstance(declared, Mapping) or hit is None:
        return []
    listed, match = declared.get("cases"), declared.get("match")
    if not hit["n"]:
        return [f"  answers: none of {listed} listed case(s) judged (every first lane failed)"]
    return [
        f"  answers over {hit['n']} of {listed} listed case(s), match {match}: "
        f"hit@k {_mean(hit):.3f} ({round(hit['sum'])}/{hit['n']}), "
        f"mean MRR {_mean(metrics['answers.mrr']):.3f}, "
        f"mean coverage {_mean(metrics['answers.coverage']):.3f}"
    ]


STABILITY_NAMED = 5
"""How many unstable cases the stability line names."""


def stability_lines(doc: Mapping[str, Any], scores: Scores) -> list[str]:
    """With ``--repeat`` N > 1: how many cases were unstable, naming the first few."""
    rate = scores.metrics.get(UNSTABLE_RATE)
    if rate is None:
        return []
    repeats = doc.get("inputs", {}).get("repeat")
    unstable = scores.cases.filter(pl.col(STABILITY_UNSTABLE).fill_null(False))
    line = (
        f"  stability over {repeats} repetition(s): {rate['numerator'] or 0} of {rate['n']} "
        "case(s) unstable (a compared metric differed between repetitions)"
    )
    named = [
        f"{case_id} ({', '.join(differs)})"
        for case_id, differs in unstable.select("case_id", STABILITY_DIFFERS)
        .head(STABILITY_NAMED)
        .iter_rows()
    ]
    if named:
        more = unstable.height - len(named)
        line += ": " + "; ".join(named) + (f"; ... and {more} more" if more else "")
    return [line]


def _budget_lines(prepared: PreparedRun, metrics: Mapping[str, Any]) -> list[str]:
    """§7.5: budget, diversity and rerank lines."""
    lines: list[str] = []
    if prepared.options.records_budget:
        items = metrics["budget.items_used"]

        def one(metric: Mapping[str, Any]) -> str:
            return "n/a" if not metric["n"] else f"{_mean(metric):.1f}"

        rate = metrics["budget.omitted_rate"]["value"]
        lines.append(
            f"  budget over {items['n']} case(s): mean {one(items)} item(s) / "
            f"{one(metrics['budget.bytes_used'])} byte(s) / "
            f"{one(metrics['budget.tokens_used'])} token(s) used, budget-omitted rate "
            f"{'n/a' if rate is None else f'{rate:.3f}'}"
        )
    diversity = metrics["diversity.sources"]
    if diversity["n"]:
        lines.append(
            f"  diversity over {diversity['n']} case(s): mean {_mean(diversity):.1f} distinct "
            "source(s) in admitted evidence"
        )
    if prepared.options.rerank is not None:
        rerank = metrics["rerank.ran"]
        attempted = rerank["n"]
        ran = rerank["numerator"] or 0
        lines.append(
            f"  rerank '{prepared.options.rerank}' over {attempted} attempted case(s): "
            f"{ran} ran, {attempted - ran} degraded"
        )
    return lines


# --------------------------------------------------------------------------- must-refuse


def _floors_text(floors: list[Any]) -> str:
    if not floors:
        return "no effective vector floor reported"
    spelled = ", ".join(f"{float(value):g}" for value in floors)
    return f"floor {spelled}" if len(floors) == 1 else f"floors {spelled}"


def _surfaced_detail(entry: Mapping[str, Any]) -> str:
    """``passage: corpus/x.md paragraph 4 (vector rank 1)`` or the first candidate."""
    passage = entry.get("passage") or {}
    if passage.get("verdict") == "surfaced":
        top = passage.get("top") or []
        if not top:
            return "passage"
        hit = top[0]
        lanes = hit.get("lanes") or {}
        ranks = ", ".join(f"{lane} rank {lanes[lane]['rank']}" for lane in lanes)
        return f"passage: {hit['source']} paragraph {hit['paragraph']} ({ranks})"
    evidence = entry.get("evidence") or {}
    if evidence.get("verdict") == "surfaced":
        top = evidence.get("top") or []
        if not top:
            return f"evidence: {evidence.get('omitted_total', 0)} candidate(s) hidden by the budget"
        item = top[0]
        where = f" {item['source']} paragraph {item['paragraph']}" if "source" in item else ""
        return f"evidence: {item['kind']}{where} ({', '.join(item.get('lanes') or [])})"
    for cue in (entry.get("structural") or {}).get("cues") or []:
        candidates = cue.get("candidates") or []
        if candidates:
            first = candidates[0]
            how = ", ".join(str(first[key]) for key in ("tier", "kind") if key in first)
            return f"structural: cue '{cue['cue']}' → {first['name']} ({how})"
    return "structural"


def must_refuse_stderr_lines(block: Mapping[str, Any]) -> list[str]:
    """ABSTENTION.md §3.9: the totals with the rule and floor, one line per
    surfaced case (id, kind, the probe, its top locator or candidate), then
    the block's warnings — each with the ``taguru: evaluate: `` prefix."""
    counts = block["counts"]
    cases = block["cases"]
    lines = [
        f"{PREFIX}must-refuse: {len(cases)} case(s), rule {block['rule']}, "
        f"{_floors_text(block['vector']['effective_floors'])} — {counts['abstained']} abstained, "
        f"{counts['surfaced']} surfaced, {counts['undetermined']} undetermined, "
        f"{counts['failed']} failed"
    ]
    lines.extend(
        f"{PREFIX}must-refuse case '{entry['case_id']}' ({entry['kind']}) surfaced by "
        f"{_surfaced_detail(entry)}"
        for entry in cases
        if entry["verdict"] == "surfaced"
    )
    lines.extend(f"{PREFIX}must-refuse: {warning}" for warning in block["warnings"])
    # Queries, source names, candidate names and the server's reasons are not ours.
    return [one_line(line) for line in lines]


def share_text(metric: Mapping[str, Any]) -> str:
    """A Ratio as ``0.750 (3/4)``, or ``n/a (n=0)``: always with its own denominator."""
    if not metric["n"]:
        return "n/a (n=0)"
    return f"{metric['value']:.3f} ({metric['numerator']}/{metric['n']})"


def must_refuse_failed_lines(block: Mapping[str, Any]) -> list[str]:
    """Must-refuse probes that failed, in file order, capped as taguru caps its
    failed-case lines: a block of the project's own after the must-refuse lines,
    never among taguru's (which walk only ``cases[]``; docs/decisions.md)."""
    entries = []
    for entry in block["cases"]:
        if entry["verdict"] != "failed":
            continue
        probe = entry.get("passage") or entry.get("evidence") or {}
        cue_errors = [
            cue["error"]
            for cue in (entry.get("structural") or {}).get("cues") or []
            if "error" in cue
        ]
        detail = probe.get("message") or (cue_errors[0] if cue_errors else "")
        reason = entry.get("reason") or "failed"
        entries.append(f"case '{entry['case_id']}': {reason}" + (f": {detail}" if detail else ""))
    return capped_lines(
        "must-refuse", entries, "every one is in evaluation.json's abstention.cases"
    )


def must_refuse_lines(doc: Mapping[str, Any]) -> list[str]:
    """The stdout trade-off pair (ABSTENTION.md §3.11): the must-refuse
    population's refusal rates beside the answerable population's rates, each
    with its own numerator and denominator, never pooled; then the failed probes."""
    metrics = doc["metrics"]
    block = doc["abstention"]
    counts = block["counts"]
    false_answers = metrics["abstention.false_answers"]
    answerable = metrics["answerability.undetermined_rate"]["n"]
    if not answerable:
        # "over 0 answerable case(s)" read as a count of the eval set; say why none counts.
        total = (doc.get("inputs") or {}).get("eval", {}).get("cases")
        answerability = (
            f"  answerability: none of {total} eval case(s) is answerable here — a case is "
            "answerable once it declares a relevant expected_sources entry and its passage "
            "lane completed (import-golden writes expected_sources with --sources-column)"
        )
    else:
        answerability = (
            f"  answerability over {answerable} answerable "
            f"case(s): supported {share_text(metrics['answerability.supported_rate'])}, "
            "supported when offered "
            f"{share_text(metrics['answerability.supported_when_offered'])}, false refusal "
            f"{share_text(metrics['answerability.false_refusal_rate'])}, offered "
            f"{share_text(metrics['answerability.offered_rate'])}"
        )
    return [
        f"  must-refuse over {len(block['cases'])} case(s), rule {block['rule']}: refusal rate "
        f"{share_text(metrics['abstention.refusal_rate'])}, passage "
        f"{share_text(metrics['abstention.passage.refusal_rate'])}, structural "
        f"{share_text(metrics['abstention.structural.refusal_rate'])}; "
        f"{int(false_answers['value']) if false_answers['n'] else 'n/a'} false answer(s), "
        f"{counts['undetermined']} undetermined, {counts['failed']} failed",
        answerability,
        *must_refuse_failed_lines(block),
    ]
